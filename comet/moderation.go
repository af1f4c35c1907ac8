package comet

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
)

// Moderation events job pushes to /push (danmaku.Event), and the refusal
// of a banned user's join.
//
// A del event removes the messages from the room's ring (every position
// of them) and goes to the room's viewers as the del frame
// {"op":"del","room":R,"ids":[...]}, queued behind the frames they have,
// so a viewer that was given a message before gets its deletion after it.
// The positions of deleted messages stay holes: a resume over them is
// recovered without them and without a gap, and the history in Redis holds
// tombstones at the same positions, so a read from Redis agrees with the
// ring. The room remembers the last 1,024 deleted ids, so a history read
// that raced with the deletion, or a late redelivery, cannot bring one
// back.
//
// A comet that missed a del event (job left it out while it failed
// pushes) learns it from the count of deleted ids in the epoch that job
// puts in every push (Batch.Dels, Event.Dels) and that history and head
// reads return: a count beyond the one it applied makes it read the room's
// deletion log (route.Deletions) and apply what it lacks, like a gap in
// positions makes it read the history.
//
// A ban event takes the room away from the user's connections, with an
// error frame "banned" naming it; a connection left without rooms is
// closed with CloseBanned. The registry refuses the user's joins and subs
// of the room while the ban lasts (route.BanError), the same way.

// CloseBanned closes a connection banned from its only room, and one
// whose join (or sub, holding no other room) a ban refused.
const CloseBanned = 4003

// codeBanned is the error frame sent before CloseBanned.
const codeBanned = danmaku.CodeBanned

// deleteMsgs applies a del event: the room's ring forgets the messages and
// every local viewer of the room gets the del frame. It returns the number
// of viewers the frame was handed to.
func (s *Server) deleteMsgs(ev danmaku.Event) int {
	r := s.hub.room(ev.Room)
	if r == nil {
		return 0 // nothing of the room here; a later read of its history has the tombstones
	}
	r.mu.Lock()
	if r.dead {
		r.mu.Unlock()
		return 0
	}
	n, removed, slow := r.deleteLocked(ev.IDs)
	t := &r.tl
	behind := false
	if ev.Epoch != "" && ev.Epoch == t.Epoch {
		// This event's ids are the last ones counted in ev.Dels.
		behind = t.DelsBehind(ev.Epoch, ev.Dels-int64(len(ev.IDs)))
		if !behind {
			t.Dels = max(t.Dels, ev.Dels)
		}
	}
	r.mu.Unlock()
	s.cut(slow)
	s.metrics.deleted(removed)
	if behind {
		r.sync.Lock()
		s.syncDels(r)
		r.sync.Unlock()
	}
	return n
}

// deleteLocked removes ids from r's ring and hands the del frame to its
// viewers; r.mu is held. It returns the viewers reached, the ring entries
// removed and the viewers to cut.
func (r *room) deleteLocked(ids []string) (n, removed int, slow []*conn) {
	removed = r.tl.Remove(ids)
	r.unholdLocked(ids)
	data, err := json.Marshal(delFrame{Op: danmaku.OpDel, Room: r.id, IDs: ids})
	if err != nil {
		return 0, removed, nil
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		return 0, removed, nil
	}
	n, slow = r.deliverLocked(item{PM: pm, Size: len(data)}, nil)
	return n, removed, slow
}

// syncDels reads the room's deletion log and applies the deletions this
// comet missed; the caller holds r.sync.
func (s *Server) syncDels(r *room) {
	r.mu.Lock()
	after := r.tl.Dels
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	s.metrics.historyRead("deletions")
	epoch, dels, ids, err := s.rt.Deletions(ctx, r.id, after)
	if err != nil {
		s.metrics.registryError()
		s.log.Warn("read room deletions", zap.String("room", r.id), zap.Error(err))
		return
	}
	r.mu.Lock()
	t := &r.tl
	var slow []*conn
	removed := 0
	if epoch == t.Epoch && dels > t.Dels {
		if len(ids) > 0 {
			_, removed, slow = r.deleteLocked(ids)
		}
		t.Dels = dels
	}
	r.mu.Unlock()
	s.cut(slow)
	s.metrics.deleted(removed)
	if len(ids) > 0 {
		s.metrics.repaired(repairDels, len(ids))
	}
}

// banUser applies a ban event: every local connection of the user in the
// room leaves it and is told so (refuseBanned). It returns how many did.
func (s *Server) banUser(ev danmaku.Event) int {
	r := s.hub.room(ev.Room)
	if r == nil {
		return 0
	}
	var out []*member
	r.mu.Lock()
	for _, m := range r.members {
		if m.c.user == ev.User {
			out = append(out, m)
		}
	}
	r.mu.Unlock()
	left := time.Until(time.UnixMilli(ev.Until))
	n := 0
	for _, m := range out {
		if ok, _ := m.c.dropMember(m); ok {
			m.c.leave(m)
			m.c.refuseBanned(ev.Room, left)
			n++
		}
	}
	return n
}

// refuseBanned tells the viewer it is banned from room, which it is no
// longer in. A connection left without rooms is closed with CloseBanned
// once the error frame is written; one that holds other rooms keeps them.
func (c *conn) refuseBanned(room string, left time.Duration) {
	c.s.metrics.rejected("banned")
	secs := max(int64((left+time.Second-1)/time.Second), 1)
	c.sendRoomError(room, codeBanned, "banned from room "+room+" for another "+strconv.FormatInt(secs, 10)+" s")
	if len(c.rooms()) == 0 {
		c.closeAfterQueued(CloseBanned, "banned")
	}
}
