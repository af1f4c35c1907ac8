package comet

import "github.com/danmaku/danmaku/comet/internal/sendq"

// A push's live delivery stages its frames: it queues one for every
// viewer of the room under the room's lock without waking a drain, and
// the push handler answers job before it wakes the drains the viewers'
// writers owe. Waking a drain for each viewer inside the loop let the
// drains, each writing a socket, take the CPU from the loop, so a push
// lasted about as long as the writes of its frame, and job's next
// delivery to the room (and a high-priority message behind it) waited
// for them. The answer still means what it did: the batch is in the
// room's timeline and in every local viewer's queue.

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

// unstageLocked ends the staging of r and returns the viewers whose
// drains it owes; r.mu is held.
func (r *room) unstageLocked() []*conn {
	starts := r.starts
	r.staged, r.starts = false, nil
	return starts
}

// startDrains wakes the drains of the viewers a staged delivery listed.
func startDrains(starts []*conn) {
	for _, c := range starts {
		c.w.Start(c)
	}
}
