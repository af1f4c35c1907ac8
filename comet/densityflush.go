package comet

import (
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/density"
)

// Held-back frames of capped tiers. A viewer capped at 30 normal messages
// a second gets about 6 of them in each 200 ms window; sending them in one
// frame a second instead of five costs its comet a fifth of the writes,
// and the client spreads them over the second by their server times
// anyway. So a capped tier that is thinning the room (it left something
// out since its last frame) holds what it keeps back and sends it once
// every Config.DensityFlush (1 s), all such tiers of a room together:
// with the first batch after the interval, or, when no batch comes, when
// the room's flush timer fires.
//
// Nothing else waits. A batch with a high-priority message flushes every
// tier at once: the held messages go out with it, in position order, in
// one frame. A viewer whose own message a holding tier keeps or leaves out
// gets, at once, a frame of its own with what the tier held and its
// message. A tier that keeps every message of the room (the room is
// quieter than its cap) and the all tier send every batch as it comes.
//
// Positions stay in order for every viewer: a held frame carries the
// positions of the messages it holds, which come before anything sent
// after it; the writer drops what a viewer already has (its got position
// in the room), so a viewer that joined, resumed or got a frame of its own
// meanwhile is not sent a position twice. Skipped counts stay exact: a
// viewer brought up to date on its own (a join, a change of tier, its own
// message, a catch-up from the ring after its queue overflowed) is marked
// with what its tier had left out by then, and its next frame of the tier
// counts only the rest; a tier's frame takes the room's last position as
// its own (through), so the writer and a catch-up start after every
// position its skipped count took in. The tier a viewer leaves hands it
// what it held for it.

// carry is what a tier left out and holds back since its last live
// frame: the messages it keeps but has not sent (of epoch epoch), the
// normal messages it skipped, and whether the frame that began the epoch
// was empty for it. gen counts the tier's frames, so a viewer's mark can
// tell whether it is about the carry the tier holds now.
type carry struct {
	msgs    []danmaku.Message
	epoch   string
	skipped int64
	start   bool
	gen     uint64
}

// hold adds what a tier of cap keeps of msgs to c's held messages and
// what it leaves out to its skipped count.
func (c *carry) hold(msgs []danmaku.Message, needs []float64, cp int, start bool, epoch string) {
	if len(c.msgs) == 0 {
		c.epoch = epoch
	}
	var skipped int64
	c.msgs, skipped = density.Thin(c.msgs, msgs, needs, cp)
	c.skipped += skipped
	c.start = c.start || start
}

// mark is what a viewer's tier had left out when the viewer was last
// brought up to date on its own: the tier's slot, its carry's generation
// and skipped count then.
type mark struct {
	slot    int
	gen     uint64
	skipped int64
}

// holds reports whether the tier of slot holds its part of f back: the
// comet holds capped tiers' frames, f is no flush, and the tier is
// thinning the room (it left something out of f or since its last frame).
func (f *fanOut) holds(slot int) bool {
	r := f.r
	cp := r.dc.tiers.Cap(slot)
	if r.dc.flushEvery <= 0 || cp == 0 || f.flush {
		return false
	}
	if c := &r.carry[slot]; len(c.msgs) > 0 || c.skipped > 0 {
		return true
	}
	for _, n := range f.needs {
		if !density.Keeps(n, cp) {
			return true
		}
	}
	return false
}

// flushDueLocked reports whether a batch of msgs arriving now sends what
// capped tiers hold: it has a high-priority message, DensityFlush passed
// since the room's last flush, or a tier holds a frame's worth; r.mu is
// held.
func (r *room) flushDueLocked(msgs []danmaku.Message, now time.Time) bool {
	every := r.dc.flushEvery
	if every <= 0 || now.Sub(r.lastFlush) >= every {
		return true
	}
	for i := range msgs {
		if msgs[i].Priority == danmaku.PriorityHigh {
			return true
		}
	}
	for i := range r.carry {
		if len(r.carry[i].msgs) >= replayChunk {
			return true
		}
	}
	return false
}

// holdingLocked reports whether a tier of r holds messages back; r.mu is
// held.
func (r *room) holdingLocked() bool {
	for i := range r.carry {
		if len(r.carry[i].msgs) > 0 {
			return true
		}
	}
	return false
}

// flushLocked sends every tier's held messages to its viewers (auto is
// the slot of those that asked for no cap); r.mu is held.
func (r *room) flushLocked(auto int, now time.Time, slow []*conn) (int, []*conn) {
	r.lastFlush = now
	return r.fanLocked(r.newFanOut(nil, false, true, auto), slow)
}

// armFlushLocked starts r's flush timer when a tier holds messages and
// none runs; r.mu is held.
func (r *room) armFlushLocked(now time.Time) {
	every := r.dc.flushEvery
	if every <= 0 || r.flushTimer != nil || !r.holdingLocked() {
		return
	}
	r.flushTimer = time.AfterFunc(max(r.lastFlush.Add(every).Sub(now), time.Millisecond), r.flushTimerFired)
}

// flushTimerFired sends what r's tiers hold when no batch did within
// DensityFlush of the last flush.
func (r *room) flushTimerFired() {
	r.mu.Lock()
	r.flushTimer = nil
	now := time.Now()
	if r.dead || !r.holdingLocked() {
		r.mu.Unlock()
		return
	}
	if now.Sub(r.lastFlush) < r.dc.flushEvery {
		r.armFlushLocked(now) // a batch flushed meanwhile
		r.mu.Unlock()
		return
	}
	_, slow := r.flushLocked(r.autoWas, now, nil)
	r.mu.Unlock()
	for _, c := range slow {
		c.slowConsumer()
	}
}

// unholdLocked drops deleted messages from what r's tiers hold; r.mu is
// held.
func (r *room) unholdLocked(ids []string) {
	for i := range r.carry {
		c := &r.carry[i]
		if len(c.msgs) == 0 {
			continue
		}
		kept := c.msgs[:0]
		for _, m := range c.msgs {
			gone := false
			for _, id := range ids {
				gone = gone || m.ID == id
			}
			if !gone {
				kept = append(kept, m)
			}
		}
		clear(c.msgs[len(kept):])
		c.msgs = kept
	}
}

// handOverLocked gives m, leaving the tier of slot old, what that tier
// holds; r.mu is held. It reports whether m's queue overflowed.
func (r *room) handOverLocked(m *member, old int) (slow bool) {
	if old < 0 || old >= len(r.carry) || len(r.carry[old].msgs) == 0 {
		return false
	}
	c := &r.carry[old]
	b := danmaku.NewBatch(r.id, append([]danmaku.Message(nil), c.msgs...))
	b.Epoch, b.Skipped = c.epoch, c.skipped
	if m.mark.slot == old && m.mark.gen == c.gen {
		b.Skipped = max(b.Skipped-m.mark.skipped, 0)
	}
	return m.c.enqueue(r.soloItem(&b)) == queueFull
}

// soloItem is b, a frame of r for one viewer, encoded by its writer, with
// the last position it accounts for when it has positions (through).
func (r *room) soloItem(b *danmaku.Batch) item {
	it := item{Batch: b, Src: b}
	if last := b.Msgs[len(b.Msgs)-1].Pos; last > 0 && b.Epoch != "" {
		setThrough(b, r.through(b.Epoch, last))
		it.Pos, it.Epoch, it.Room = max(last, b.Through), b.Epoch, r
	}
	return it
}

// setThrough sets b.Through to through, the last position b's skipped
// count takes in, when b's messages end before it (the wire's through:
// where a client resumes).
func setThrough(b *danmaku.Batch, through int64) {
	if n := len(b.Msgs); through > 0 && (n == 0 || b.Msgs[n-1].Pos < through) {
		b.Through = through
	}
}

// through is the last position a capped tier's frame of epoch whose last
// message is at last accounts for; r.mu is held. Its skipped count takes
// in every position the tier was handed up to the room's last (those left
// out after its last kept message too), so that is the frame's position:
// the writer records it as the viewer's position in the room, a later
// frame is cut to the positions after it, and a catch-up replays from it,
// and none of them counts a left-out message the frame counted again.
func (r *room) through(epoch string, last int64) int64 {
	if epoch == r.tl.Epoch {
		return max(last, r.tl.Last)
	}
	return last
}

// markLocked records in m what its tier (slot) left out so far, as m
// was brought up to date on its own; r.mu is held.
func (r *room) markLocked(m *member, slot int) {
	if slot < 0 || slot >= len(r.carry) {
		m.mark = mark{}
		return
	}
	c := &r.carry[slot]
	m.mark = mark{slot: slot, gen: c.gen, skipped: c.skipped}
}

// lessSkipped is it for a viewer that was told of n of its skipped
// messages already: encoded for it alone with n fewer.
func lessSkipped(it item, n int64) item {
	if it.Src == nil {
		return it
	}
	b := *it.Src
	b.Skipped = max(b.Skipped-n, 0)
	it.PM, it.Batch, it.Src = nil, &b, &b
	return it
}
