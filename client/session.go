package client

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// frame is any frame a comet sends, decoded once; Msgs is decoded by op
// (messages or notices).
type frame struct {
	danmaku.Welcome
	Replay       bool            `json:"replay"`
	Msgs         json.RawMessage `json:"msgs"`
	IDs          []string        `json:"ids"`
	Code         string          `json:"code"`
	Message      string          `json:"message"`
	RetryAfterMs int64           `json:"retryAfterMs"`
}

// readWait is how long a connection may stay silent (no frame, no ping)
// before the viewer gives it up: the comet pings every heartbeatMs and
// cuts a viewer silent for 60 s.
const readWait = 75 * time.Second

// session reads ws until it ends. rooms are the rooms its URL named.
func (v *Viewer) session(ws *websocket.Conn, u string, rooms []string) error {
	defer ws.Close()
	ws.SetReadLimit(maxFrame)
	wait := readWait
	ws.SetReadDeadline(time.Now().Add(wait))
	l := &wsLink{ws: ws}
	ws.SetPingHandler(func(data string) error {
		ws.SetReadDeadline(time.Now().Add(wait))
		l.mu.Lock()
		defer l.mu.Unlock()
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
	})
	if ok, err := v.opened(l, u, rooms); !ok {
		return err
	}
	defer v.unlink()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return err
		}
		ws.SetReadDeadline(time.Now().Add(wait))
		if more, err := v.frame(data, &wait); !more {
			return err
		}
	}
}

// maxFrame bounds a frame from a comet (a replay holds up to 1000
// messages).
const maxFrame = 32 << 20

// opened makes l the viewer's connection, reports it and sends the
// frames that bring it to the rooms held now; false (with the error, nil
// when the viewer is closing) when the session is over already. The
// caller calls unlink when it ends.
func (v *Viewer) opened(l link, u string, rooms []string) (bool, error) {
	v.mu.Lock()
	if v.closing() {
		v.mu.Unlock()
		return false, nil
	}
	v.link = l
	catchUp := v.catchUpLocked(rooms)
	if len(v.rooms) == 0 {
		v.attempt = 0 // no welcome will come
	}
	v.mu.Unlock()
	if !v.emit(Event{Kind: Connected, URL: u}) {
		v.unlink()
		return false, nil
	}
	for _, f := range catchUp {
		if err := l.send(f); err != nil {
			v.unlink()
			return false, err
		}
	}
	return true, nil
}

func (v *Viewer) unlink() {
	v.mu.Lock()
	v.link = nil
	v.mu.Unlock()
}

// frame handles one frame of the comet's; false (with the error, nil
// when the viewer is closing) ends the session. A welcome's heartbeat
// sets how long the connection may stay silent.
func (v *Viewer) frame(data []byte, wait *time.Duration) (bool, error) {
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		return false, fmt.Errorf("bad frame %.100q: %w", data, err)
	}
	if f.Op == danmaku.OpWelcome && f.HeartbeatMs > 0 {
		*wait = max(readWait, 3*time.Duration(f.HeartbeatMs)*time.Millisecond)
	}
	return v.handle(&f, data), nil
}

// catchUpLocked returns the frames that bring a connection opened for
// rooms to the rooms held now (Join, Subscribe or Unsubscribe while it
// was opening).
func (v *Viewer) catchUpLocked(rooms []string) []danmaku.ClientFrame {
	var out []danmaku.ClientFrame
	now := v.rooms
	if len(now) > 0 && (len(rooms) == 0 || now[0] != rooms[0]) {
		out = append(out, v.frameLocked(danmaku.OpJoin, now[0]))
		rooms = now[:1]
	}
	for _, r := range rooms {
		if !slices.Contains(now, r) {
			out = append(out, danmaku.ClientFrame{Op: danmaku.OpUnsub, Room: r})
		}
	}
	for _, r := range now {
		if !slices.Contains(rooms, r) {
			out = append(out, v.frameLocked(danmaku.OpSub, r))
		}
	}
	return out
}

// handle turns one frame into events; false when the viewer is closing.
func (v *Viewer) handle(f *frame, raw []byte) bool {
	switch f.Op {
	case danmaku.OpWelcome:
		w := f.Welcome
		gap := v.welcomed(&w)
		if !v.emit(Event{Kind: Welcome, Room: w.Room, Welcome: &w, Epoch: w.Epoch}) {
			return false
		}
		if !v.emitAll(v.newState(w.Room, w.State), v.newPin(danmaku.OpWelcome, w.Room, w.Pin)) {
			return false
		}
		if gap != nil {
			return v.emit(Event{Kind: Gap, Room: w.Room, Gap: gap})
		}
	case danmaku.OpState:
		if v.holds(f.Room) {
			return v.emitAll(v.newState(f.Room, f.State))
		}
	case danmaku.OpPin, danmaku.OpUnpin:
		if v.holds(f.Room) {
			return v.emitAll(v.newPin(f.Op, f.Room, f.Pin))
		}
	case danmaku.OpMsgs:
		var msgs []danmaku.Message
		if err := json.Unmarshal(f.Msgs, &msgs); err != nil || !v.holds(f.Room) {
			return true
		}
		fresh, gap := v.received(f, msgs)
		if gap != nil && !v.emit(Event{Kind: Gap, Room: f.Room, Gap: gap}) {
			return false
		}
		if len(fresh) > 0 {
			return v.emit(Event{Kind: Messages, Room: f.Room, Msgs: fresh, Epoch: f.Epoch, Replay: f.Replay})
		}
	case danmaku.OpDel:
		if !v.holds(f.Room) {
			return true
		}
		v.mu.Lock()
		for _, id := range f.IDs {
			v.seen.add(id)
		}
		v.mu.Unlock()
		return v.emit(Event{Kind: Deleted, Room: f.Room, IDs: f.IDs})
	case danmaku.OpUser, danmaku.OpAll:
		var ns []danmaku.Notice
		if json.Unmarshal(f.Msgs, &ns) != nil {
			return true
		}
		v.mu.Lock()
		ns = slices.DeleteFunc(ns, func(n danmaku.Notice) bool { return !v.notices.add(n.ID) })
		v.mu.Unlock()
		if len(ns) > 0 {
			return v.emit(Event{Kind: Kind(f.Op), Notices: ns})
		}
	case danmaku.OpOnline:
		if v.holds(f.Room) {
			return v.emit(Event{Kind: Online, Room: f.Room, Online: f.Online})
		}
	case danmaku.OpUnsubscribed:
		return v.emit(Event{Kind: Unsubscribed, Room: f.Room})
	case danmaku.OpError:
		v.refused(f)
		return v.emit(Event{Kind: Refused, Room: f.Room, Err: &Error{Code: f.Code, Message: f.Message, Room: f.Room,
			RetryAfter: time.Duration(f.RetryAfterMs) * time.Millisecond}})
	case danmaku.OpPong:
	default:
		return v.emit(Event{Kind: Other, Room: f.Room, Raw: json.RawMessage(slices.Clone(raw))})
	}
	return true
}

// emitAll hands over the events that are not nil.
func (v *Viewer) emitAll(evs ...*Event) bool {
	for _, ev := range evs {
		if ev != nil && !v.emit(*ev) {
			return false
		}
	}
	return true
}

func (v *Viewer) holds(room string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Contains(v.rooms, room)
}

// refused forgets a room the comet refused or a ban took away.
func (v *Viewer) refused(f *frame) {
	switch f.Code {
	case danmaku.CodeBanned, danmaku.CodeFrameForbidden, danmaku.CodeTooManyRooms:
	default:
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rooms = slices.DeleteFunc(v.rooms, func(r string) bool { return r == f.Room })
}

// welcomed takes room's timeline from a welcome: a recovered resume keeps
// the viewer's position (the replay that follows moves it on), anything
// else starts at the welcome's; a resume the comet could not serve is the
// gap returned.
func (v *Viewer) welcomed(w *danmaku.Welcome) *GapInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.attempt = 0
	asked, wasAsked := v.asked[w.Room]
	delete(v.asked, w.Room)
	tl, had := v.timeline[w.Room]
	if w.Recovered != nil && *w.Recovered && had && (tl.epoch == w.Epoch || tl.epoch == "") {
		v.timeline[w.Room] = timeline{epoch: w.Epoch, pos: tl.pos}
		return nil
	}
	v.timeline[w.Room] = timeline{epoch: w.Epoch, pos: w.Pos}
	if w.Recovered == nil || *w.Recovered || !wasAsked {
		return nil
	}
	return &GapInfo{Reason: "resume", Epoch: asked.epoch, Pos: asked.pos, ServerEpoch: w.Epoch, ServerPos: w.Pos}
}

// received moves the room's position to the frame's last message and
// returns the messages not delivered before; a frame of another epoch
// than the one held is the gap returned.
func (v *Viewer) received(f *frame, msgs []danmaku.Message) ([]danmaku.Message, *GapInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var top int64
	fresh := msgs[:0]
	for _, m := range msgs {
		top = max(top, m.Pos)
		if v.seen.add(m.ID) {
			fresh = append(fresh, m)
		}
	}
	if f.Epoch == "" {
		return fresh, nil
	}
	tl, had := v.timeline[f.Room]
	if had && tl.epoch == f.Epoch {
		if top > tl.pos {
			v.timeline[f.Room] = timeline{epoch: f.Epoch, pos: top}
		}
		return fresh, nil
	}
	v.timeline[f.Room] = timeline{epoch: f.Epoch, pos: top}
	if !had || tl.epoch == "" {
		return fresh, nil
	}
	return fresh, &GapInfo{Reason: "epoch", Epoch: tl.epoch, Pos: tl.pos, ServerEpoch: f.Epoch, ServerPos: top}
}

// seenSet remembers the last n ids added.
type seenSet struct {
	ids  map[string]struct{}
	ring []string
	next int
}

func newSeenSet(n int) seenSet {
	return seenSet{ids: make(map[string]struct{}, n), ring: make([]string, n)}
}

// add records id and reports whether it is new.
func (s *seenSet) add(id string) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.ids, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % len(s.ring)
	s.ids[id] = struct{}{}
	return true
}
