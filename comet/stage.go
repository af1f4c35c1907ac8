package comet

import (
	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/sendq"
)

// A push's live delivery is staged: it queues a frame for every viewer
// of the room under the room's lock without waking a drain, the push
// handler answers job, and only then are the drains the viewers' writers
// owe handed to the drain pool (sendq), in the order of the viewers. The
// answer still means what it did: the batch is in the room's timeline and
// in every local viewer's queue. job's next delivery to the room, and a
// high-priority message behind it, no longer wait for the writes.
//
// While the pool has not yet reached the last drain of the room's live
// frame, a push is held (room.held) and goes out with the next frame: the
// check queued behind the drains (fanDone) sends it. Frames so follow the
// pace at which the comet writes, as they did while job's pushes waited
// for the writes. In a room whose viewers all take the all tier only
// normal messages are held: a high-priority message goes out at once,
// with what was held before it. In a room with capped viewers a
// high-priority message is held too: there each one is a frame for every
// capped viewer (it sends what the capped tiers hold, densityflush.go),
// so the high lane, not the cap, would set the frames a viewer gets; it
// waits only for the frame already being written, never for the room's
// window, and is never thinned or dropped. Any other delivery to the room
// (a repair, an event, a read that may change the epoch) sends what is
// held first, and so does a join or a catch-up of a room with capped
// viewers (whose skipped counts must not take in a held position twice),
// so the viewers' order of positions never changes.

// maxHeld is the most messages a room holds for its next frame.
const maxHeld = 4096

// staging is what a staged delivery owes once the push is answered: the
// drains to wake, then, when seq is set, the room's check behind them.
type staging struct {
	r      *room
	starts []*conn
	seq    uint64
}

// enqueueLocked hands it to c; r.mu is held. While r is staged the drain
// c's writer owes is listed in r.starts instead of woken.
func (r *room) enqueueLocked(c *conn, it item) sendq.Result {
	if !r.staged {
		return c.enqueue(it)
	}
	res, start := c.w.Stage(it, c.s.cfg.QueueSize)
	if start {
		r.starts = append(r.starts, c)
	}
	return res
}

// holdLocked holds msgs, accepted from a staged push of epoch, for the
// room's next live frame when its last one is still being written and
// they may wait; r.mu is held.
func (r *room) holdLocked(msgs []danmaku.Message, start bool, epoch string) bool {
	if !r.staged || !r.fanBusy || start || epoch != r.tl.Epoch ||
		len(msgs) == 0 || len(r.held)+len(msgs) > maxHeld ||
		r.capped == 0 && normalCount(msgs) < int64(len(msgs)) {
		return false
	}
	r.held = append(r.held, msgs...)
	return true
}

// sendHeldLocked sends what r holds now, as a frame of its own, when r
// has capped viewers or m, a viewer about to be brought up to date from
// the timeline, is capped: the positions the viewer gets that way are
// then counted by its tier's frames before it, not after; r.mu is held.
func (r *room) sendHeldLocked(m *member, slow []*conn) []*conn {
	if len(r.held) > 0 && (r.capped > 0 || m != nil && !r.dc.everything(r.dc.want(int(m.req.Load())))) {
		_, slow = r.deliverMsgsLocked(nil, false, slow)
	}
	return slow
}

// endStageLocked ends the staging of r and returns what it owes; r.mu
// is held. When it woke drains, the room's check goes behind them.
func (r *room) endStageLocked() staging {
	st := staging{r: r, starts: r.starts}
	r.staged, r.starts = false, nil
	if len(st.starts) > 0 {
		r.liveSeq++
		r.fanBusy = true
		st.seq = r.liveSeq
	}
	return st
}

// finish wakes the drains a staged delivery owes, then queues the room's
// check behind them.
func (s *Server) finish(st staging) {
	for _, c := range st.starts {
		c.w.Start(c)
	}
	if st.seq != 0 {
		sendq.Then(func() { s.fanDone(st.r, st.seq) })
	}
}

// fanDone runs once the drain pool has reached the last drain of the
// room's live frame seq: it sends what the room held meanwhile as one
// frame, staged as a push's, or else ends the hold.
func (s *Server) fanDone(r *room, seq uint64) {
	r.mu.Lock()
	if r.liveSeq != seq {
		r.mu.Unlock()
		return // a later frame's check follows
	}
	if len(r.held) == 0 || r.dead {
		r.fanBusy = false
		r.held = nil
		r.mu.Unlock()
		return
	}
	r.staged = true
	_, slow := r.deliverMsgsLocked(nil, false, nil)
	st := r.endStageLocked()
	if st.seq == 0 {
		r.fanBusy = false // every viewer's drain was running: nothing to wait for
	}
	r.mu.Unlock()
	s.cut(slow)
	s.finish(st)
}
