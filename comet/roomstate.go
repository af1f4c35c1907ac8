package comet

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
)

// Room settings (danmaku.RoomState). A room keeps the settings it was
// last told, with their version: a state event job pushes (when a
// moderator changes them) replaces them when its version is higher and
// goes to the room's viewers as the state frame, behind the frames they
// have; a welcome carries them. A comet learns the settings of a room
// from Redis when its first viewer there joins (it was not registered in
// the room before, so job did not push it the room's events), and from
// state events while it holds viewers there. A state or pin event this
// comet missed (its push failed, the comet was away) is caught by the
// next batch job pushes: each carries the room's settings version
// (Batch.Sv), and one above what the room has makes the comet read the
// settings again (settingsBehind).

// stateFrame is the frame of a settings change.
type stateFrame = danmaku.StateFrame

// ensureState reads r's settings from Redis when the comet may not know
// them: never read, or the room had no viewer here since the last read
// (its last viewer's leave forgets them: job pushed no state event here
// meanwhile, whenever the change came). The caller registered the joiner
// first, so a change whose event job routes without this comet was
// written to Redis before this read. A read that fails leaves what the
// room has; the joiner gets that. The caller is the room's join line, so
// a crowd joining at once makes one read.
func (s *Server) ensureState(r *room) {
	r.mu.Lock()
	need := !r.stateKnown || len(r.members) == 0 && time.Since(r.stateAt) >= freshFor
	r.mu.Unlock()
	if !need {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	rd, err := s.rt.ReadRoom(ctx, r.id)
	if err != nil {
		s.metrics.registryError()
		s.log.Warn("read room state", zap.String("room", r.id), zap.Error(err))
		return
	}
	r.mu.Lock()
	if rd.State.Ver >= r.state.Ver {
		r.state = rd.State
	}
	if rd.PinVer >= r.pinVer {
		r.pin, r.pinVer = rd.Pin, rd.PinVer
	}
	r.stateKnown, r.stateAt = true, time.Now()
	r.mu.Unlock()
}

// stateLocked returns r's settings for a welcome: nil while every mode is
// off and nothing was ever set; r.mu is held.
func (r *room) stateLocked() *danmaku.RoomState {
	if r.state.Ver == 0 {
		return nil
	}
	st := r.state
	return &st
}

// pinLocked returns r's pin for a welcome: nil when none or ended; r.mu
// is held.
func (r *room) pinLocked(now time.Time) *danmaku.Pin {
	if r.pin == nil || r.pin.Until <= now.UnixMilli() {
		return nil
	}
	p := *r.pin
	return &p
}

// applyPin applies a pin or unpin event of a version above the room's: a
// pin replaces the room's pin, an unpin takes it away when it is the pin
// named; either goes to the room's local viewers as its frame. It returns
// the number of viewers the frame was handed to.
func (s *Server) applyPin(ev danmaku.Event) int {
	r := s.hub.room(ev.Room)
	if r == nil || ev.Pin == nil {
		return 0
	}
	it, ok := frameItem(danmaku.PinFrame{Op: ev.Op, Room: ev.Room, Pin: *ev.Pin})
	if !ok {
		return 0
	}
	r.mu.Lock()
	if r.dead || ev.Pin.Ver <= r.pinVer {
		r.mu.Unlock()
		return 0
	}
	r.pinVer = ev.Pin.Ver
	switch {
	case ev.Op == danmaku.OpPin:
		p := *ev.Pin
		r.pin = &p
	case r.pin != nil && r.pin.ID == ev.Pin.ID:
		r.pin = nil
	}
	n, slow := r.deliverLocked(it, nil)
	r.mu.Unlock()
	s.cut(slow)
	return n
}

// applyState applies a state event: a version above the room's replaces
// its settings and goes to the room's local viewers as the state frame.
// It returns the number of viewers the frame was handed to.
func (s *Server) applyState(ev danmaku.Event) int {
	r := s.hub.room(ev.Room)
	if r == nil || ev.State == nil {
		return 0 // no viewer here: the first joiner reads the settings
	}
	it, ok := frameItem(stateFrame{Op: danmaku.OpState, Room: ev.Room, State: *ev.State})
	if !ok {
		return 0
	}
	r.mu.Lock()
	if r.dead || ev.State.Ver <= r.state.Ver {
		r.mu.Unlock()
		return 0 // a redelivery, or older than what a join read
	}
	r.state, r.stateKnown, r.stateAt = *ev.State, true, time.Now()
	n, slow := r.deliverLocked(it, nil)
	r.mu.Unlock()
	s.cut(slow)
	return n
}

// applyShadow applies a shadow event: the message of a user hidden in the
// room goes, as a msgs frame without epoch or position, to that user's
// own connections to the room, and to no other viewer. The room's ring
// and timeline do not take it, so no resume, catch-up or history replays
// it. It returns the number of connections it was handed to.
func (s *Server) applyShadow(ev danmaku.Event) int {
	r := s.hub.room(ev.Room)
	if r == nil || ev.Msg == nil {
		return 0
	}
	it, ok := frameItem(danmaku.NewBatch(ev.Room, []danmaku.Message{*ev.Msg}))
	if !ok {
		return 0
	}
	r.mu.Lock()
	var own []*conn
	for _, m := range r.members {
		if m.c.user == ev.User {
			own = append(own, m.c)
		}
	}
	n, slow := 0, []*conn(nil)
	if len(own) > 0 && !r.dead {
		n, slow = enqueueAll(it, own, nil)
	}
	r.mu.Unlock()
	s.cut(slow)
	return n
}

// frameItem encodes v, a frame of a room's event, once for every viewer
// it goes to.
func frameItem(v any) (item, bool) {
	data, err := json.Marshal(v)
	if err != nil {
		return item{}, false
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		return item{}, false
	}
	return item{PM: pm, Size: len(data)}, true
}

// settingsBehind reads room's settings and pin again when sv, the
// settings version of a batch job pushed, is above the versions the room
// has: a state or pin event was missed. What changed goes to the room's
// viewers as its frame, as the event would have. One read at a time per
// room (the room's sync lock); a read that fails waits for the next batch.
func (s *Server) settingsBehind(room string, sv int64) {
	r := s.hub.room(room)
	if r == nil || sv == 0 {
		return
	}
	behind := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return !r.dead && sv > max(r.state.Ver, r.pinVer)
	}
	if !behind() {
		return
	}
	r.sync.Lock()
	defer r.sync.Unlock()
	if !behind() {
		return // another push's read caught up
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	rd, err := s.rt.ReadRoom(ctx, room)
	if err != nil {
		s.metrics.registryError()
		s.log.Warn("read room state after a missed change", zap.String("room", room), zap.Error(err))
		return
	}
	s.log.Info("room settings read again: a push carried a newer version", zap.String("room", room),
		zap.Int64("version", sv), zap.Int64("read", rd.State.Ver))
	if rd.State.Ver > 0 {
		s.applyState(danmaku.Event{Op: danmaku.OpState, Room: room, State: &rd.State})
	}
	r.mu.Lock()
	old, pinVer := r.pin, r.pinVer
	r.mu.Unlock()
	switch {
	case rd.PinVer <= pinVer:
	case rd.Pin != nil && rd.Pin.Until > time.Now().UnixMilli():
		s.applyPin(danmaku.Event{Op: danmaku.OpPin, Room: room, Pin: rd.Pin})
	case old != nil:
		gone := *old
		gone.Ver = rd.PinVer
		s.applyPin(danmaku.Event{Op: danmaku.OpUnpin, Room: room, Pin: &gone})
	default: // no pin before nor now: nothing to tell the viewers
		r.mu.Lock()
		r.pinVer = max(r.pinVer, rd.PinVer)
		r.mu.Unlock()
	}
}
