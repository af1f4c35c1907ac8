package job

import (
	"container/heap"
	"slices"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// scheduler owns every room buffer, every room's window and the offsets of
// the consumed records. It runs on one goroutine, so none of that needs a
// lock: records come in on in, deliveries go out on work, outcomes come back
// on results, and commit positions leave through commit.
type scheduler struct {
	cfg     Config
	m       *metrics
	in      <-chan []record     // consumed records, a fetch response each; closed when fetching stops
	work    chan<- *delivery    // capacity Workers
	results <-chan outcome      // one per delivery sent on work
	commit  func(map[int]int64) // hands commit positions over; never blocks
	// generation is the consumer's current generation (consumer.seq);
	// gen the newest one the scheduler has seen.
	generation func() int64
	gen        int64
	crashed    <-chan struct{} // closed by a crash: stop at once, commit nothing

	rooms    map[string]*roomState
	heads    map[string]knownHead // per room: the timeline head this job last assigned
	due      dueHeap
	holds    dueHeap // rooms with held messages, by the first one's release (hold.go)
	ready    []*roomState
	offsets  *offsets
	buffered int // messages kept over all rooms, held ones included
	heldN    int // messages held for their rooms' delay (hold.go)
	inflight int // deliveries sent on work and not yet back
	draining bool
	drainBy  time.Time
	// heldList lists held messages for moderators (heldlist.go).
	heldList *heldLister
}

// roomState is the scheduler's view of one room.
type roomState struct {
	name      string
	queue     []pending // waiting messages, oldest first
	windowEnd time.Time // no new broadcast before this
	due       time.Time // scheduled dispatch; zero when none
	inflight  bool
	failures  int // failed deliveries in a row
	// high counts the high-priority messages in queue: while there is one
	// the room is due at once, window or not, and none of its messages
	// is dropped for the drop policy's cooldown.
	high int
	// lane marks a lane of notices (notice.go) rather than a room: it has
	// no window, and its deliveries go out as soon as a worker is free.
	lane bool
	// held are the room's messages waiting for their delay, by release
	// time (hold.go); they are not in queue.
	held []heldMsg
}

// knownHead is a room's timeline head as this job's last delivery of the
// room left it, and when. It is passed to the room's next BeginBroadcast so
// Redis can tell a timeline that went backwards (a failover lost writes).
// It is kept for HistoryTTL: by then the timeline it names has expired
// unless another job wrote to it, and either way it says nothing any more.
type knownHead struct {
	route.Head
	at time.Time
	// marks are the heads the room's deliveries left over the last
	// HistorySpan (and the one before it), oldest first: how many messages
	// the span holds, so the history keeps them all (historySize).
	marks []headMark
}

type headMark struct {
	at   time.Time
	last int64
}

// advance records the head a delivery left at now; marks older than span
// go, except the newest of them, which the span starts after.
func (h knownHead) advance(head route.Head, now time.Time, span time.Duration) knownHead {
	if span <= 0 {
		return knownHead{Head: head, at: now}
	}
	marks := h.marks
	if head.Epoch != h.Epoch {
		marks = nil
	}
	m := headMark{at: now, last: head.Last}
	if n := len(marks); n > 1 && now.Sub(marks[n-2].at) < span/32 {
		marks[n-1] = m // marks a span/32 apart are enough to measure it
	} else {
		marks = append(marks, m)
	}
	k := 0
	for k+1 < len(marks) && !marks[k+1].at.After(now.Add(-span)) {
		k++
	}
	if k > 0 {
		marks = append(marks[:0], marks[k:]...)
	}
	return knownHead{Head: head, at: now, marks: marks}
}

// historySize is how many messages the room's history keeps after a
// delivery of n more: HistorySize, or more when the last HistorySpan held
// more, up to maxHistorySize. A hot room so keeps a span of time, enough
// to resume a viewer that was away for seconds, where HistorySize alone
// may be a second of it. A job that has not seen the room for a span
// yet (just started) keeps HistorySize.
func (h knownHead) historySize(n int, cfg Config) int {
	size := cfg.HistorySize
	if cfg.HistorySpan <= 0 || len(h.marks) == 0 {
		return size
	}
	inSpan := h.Last - h.marks[0].last + int64(n)
	return int(min(max(int64(size), inSpan), maxHistorySize))
}

// pending is one consumed message, or moderation event, waiting for its
// room's delivery.
type pending struct {
	msg danmaku.Message
	// raw is msg's JSON without a position as its envelope carried it
	// (Envelope.MsgJSON), stored and pushed as it is; nil when it has to
	// be encoded.
	raw []byte
	// ev is set on an event. An event is delivered on its own, after the
	// room's messages before it and before those after it.
	ev *danmaku.Event
	// notice is set on a notice, with user its user ("" for a broadcast).
	notice *danmaku.Notice
	user   string
	canary *danmaku.Canary // a canary (canary.go)
	part   int
	off    int64
	gen    int64 // the member's generation it was fetched in
	// waited: the message arrived while its room's window ran or a
	// delivery was in flight, so it goes out in a trailing batch.
	waited bool
}

// run schedules until stop is closed and what is buffered is delivered (or
// DrainTimeout passed, or hurry was closed), then hands over the last
// commit positions; after a crash it returns at once and commits nothing.
// Either way no delivery is in flight when it returns.
func (s *scheduler) run(stop, hurry <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	commit := time.NewTicker(s.cfg.CommitInterval)
	defer commit.Stop()
	sweep := time.NewTicker(s.cfg.SweepInterval)
	defer sweep.Stop()
	in := s.in
	for {
		var input <-chan []record
		if in != nil && s.buffered < s.cfg.MaxBuffered {
			input = in
		}
		select {
		case b, ok := <-input:
			if !ok {
				in = nil
				s.startDrain()
				break
			}
			if !s.acceptReady(b, in, time.Now()) {
				in = nil
				s.startDrain()
			}
		case o := <-s.results:
			s.complete(o, time.Now())
		case <-timer.C:
		case <-commit.C:
			s.commit(s.offsets.commits())
			s.m.pending.Set(float64(s.buffered))
		case <-sweep.C:
			s.sweep(time.Now())
		case <-stop:
			stop = nil
			s.startDrain()
		case <-hurry:
			hurry = nil
			s.startDrain()
			s.drainBy = time.Now()
		case <-s.crashed:
			s.waitInflight()
			return
		}
		now := time.Now()
		s.release(now)
		s.promote(now)
		s.dispatchReady(now)
		if s.draining && s.inflight == 0 && (s.buffered == s.heldN || now.After(s.drainBy)) {
			s.commit(s.offsets.commits())
			return
		}
		timer.Reset(s.nextWake(now))
	}
}

// nextWake is how long the scheduler may sleep: until the next room is
// due, the next held message is released or a drain's deadline.
func (s *scheduler) nextWake(now time.Time) time.Duration {
	next := time.Hour
	if s.due.Len() > 0 {
		next = max(s.due[0].at.Sub(now), 0)
	}
	if s.holds.Len() > 0 {
		next = min(next, max(s.holds[0].at.Sub(now), 0))
	}
	if s.draining {
		next = min(next, max(s.drainBy.Sub(now), 0)+time.Millisecond)
	}
	return next
}

// startDrain makes every buffered room due now, ignoring windows: shutdown
// delivers what it holds instead of waiting.
func (s *scheduler) startDrain() {
	if s.draining {
		return
	}
	s.draining = true
	s.drainBy = time.Now().Add(s.cfg.DrainTimeout)
	now := time.Now()
	for _, r := range s.rooms {
		if len(r.queue) > 0 && !r.inflight {
			r.due = time.Time{}
			s.schedule(r, now)
		}
	}
}

// waitInflight collects the outcomes of deliveries still running after a
// crash, so workers can exit; they are discarded, as in a real crash.
func (s *scheduler) waitInflight() {
	for s.inflight > 0 {
		<-s.results
		s.inflight--
	}
}

func (s *scheduler) room(name string) *roomState {
	r := s.rooms[name]
	if r == nil {
		r = &roomState{name: name}
		s.rooms[name] = r
	}
	return r
}

// acceptReady takes batch and every further batch in already waits, while
// the buffer has room: one wake-up of the scheduler per drain of what the
// consumer has ready, not per record. It reports false when in was closed.
func (s *scheduler) acceptReady(batch []record, in <-chan []record, now time.Time) bool {
	for {
		s.m.consumed.Add(float64(len(batch)))
		for i := range batch {
			s.accept(batch[i], now)
		}
		if s.buffered >= s.cfg.MaxBuffered {
			return true
		}
		var ok bool
		select {
		case batch, ok = <-in:
			if !ok {
				return false
			}
		default:
			return true
		}
	}
}

// accept takes one consumed record (counted by the caller).
func (s *scheduler) accept(rec record, now time.Time) {
	if rec.gen > s.gen {
		s.newGeneration(rec.gen)
	} else if rec.gen < s.gen {
		return // fetched before a rebalance: fetched again if still ours
	}
	s.offsets.consumed(rec.part, rec.off, rec.gen)
	if rec.err != nil {
		s.m.invalid.Inc()
		s.offsets.finished(rec.part, rec.off)
		return
	}
	if rec.env.Notice != nil {
		s.acceptNotice(rec, now)
		return
	}
	if rec.env.Canary != nil {
		s.acceptCanary(rec, now)
		return
	}
	if ev := rec.env.Event; ev != nil && !ev.ForViewers() {
		// A stream event is the archive's: nothing to deliver here.
		s.offsets.finished(rec.part, rec.off)
		return
	}
	r := s.room(rec.env.Room)
	high := rec.env.Msg.Priority.High()
	if rec.env.Event != nil {
		s.dropDeleted(r, rec.env.Event)
		// Events are never dropped and do not wait for the window.
		r.queue = append(r.queue, pending{ev: rec.env.Event, part: rec.part, off: rec.off, gen: rec.gen})
		s.buffered++
		if !r.inflight {
			s.schedule(r, s.dueAt(r, now))
		}
		return
	}
	p := pending{msg: rec.env.Msg, raw: rec.env.MsgJSON, part: rec.part, off: rec.off, gen: rec.gen}
	if at := holdUntil(rec.env, now); !at.IsZero() {
		p.raw = p.encoded()
		s.hold(r, p, at)
		return
	}
	s.enqueue(r, p, high, now)
}

// enqueue appends p, a message consumed now or released from its hold,
// to r's queue, or drops it by the room's policy.
func (s *scheduler) enqueue(r *roomState, p pending, high bool, now time.Time) {
	busy := r.inflight || len(r.queue) > 0 || now.Before(r.windowEnd)
	// A high-priority message is never dropped, by either policy: the
	// logic's per-room high-priority rate limit bounds how many come.
	if s.cfg.Policy == PolicyDrop && busy && !high {
		// One message per window; the rest are skipped.
		s.m.dropped.WithLabelValues("cooldown").Inc()
		s.offsets.finished(p.part, p.off)
		return
	}
	if s.cfg.Policy != PolicyDrop && len(r.queue) >= s.cfg.MaxPending && r.failures == 0 && !high {
		s.m.dropped.WithLabelValues("overflow").Inc()
		s.offsets.finished(p.part, p.off)
		return
	}
	p.waited = busy && !high
	p.raw = p.encoded() // its size counts toward the batch's bytes
	r.queue = append(r.queue, p)
	s.buffered++
	if high {
		r.high++
		s.m.highConsumed.Inc()
	}
	if !r.inflight {
		s.schedule(r, s.dueAt(r, now))
	}
}

// dueAt is when r, not in flight and with a queue, is to be dispatched:
// at the end of its window, or now for a lane of notices, for an event at
// the head of its queue, for a queue holding a high-priority message
// (with the messages before it, so the room's order holds) or while
// draining; never before the backoff of a room or lane whose deliveries
// fail has run out, whatever arrives.
func (s *scheduler) dueAt(r *roomState, now time.Time) time.Time {
	if r.failures > 0 && r.windowEnd.After(now) {
		return r.windowEnd // backing off after a failed delivery (see complete)
	}
	if s.draining || r.lane || r.queue[0].ev != nil || r.high > 0 || !r.windowEnd.After(now) {
		return now
	}
	return r.windowEnd
}

// schedule makes r due at t unless it is already due earlier.
func (s *scheduler) schedule(r *roomState, t time.Time) {
	if !r.due.IsZero() && !t.Before(r.due) {
		return
	}
	r.due = t
	heap.Push(&s.due, dueEntry{at: t, room: r})
}

// promote moves rooms whose time has come to the ready list.
func (s *scheduler) promote(now time.Time) {
	for s.due.Len() > 0 && !s.due[0].at.After(now) {
		e := heap.Pop(&s.due).(dueEntry)
		if !e.room.due.Equal(e.at) {
			continue // rescheduled since
		}
		e.room.due = time.Time{}
		s.ready = append(s.ready, e.room)
	}
}

// dispatchReady hands ready rooms to free workers, oldest first: at most
// Budget messages of a room per delivery, and the room's window starts.
// Once a drain is past its deadline nothing more is sent.
func (s *scheduler) dispatchReady(now time.Time) {
	if s.draining && now.After(s.drainBy) {
		return
	}
	if s.generation != nil {
		if g := s.generation(); g > s.gen {
			s.newGeneration(g)
		}
	}
	for len(s.ready) > 0 && s.inflight < s.cfg.Workers {
		r := s.ready[0]
		s.ready = s.ready[1:]
		if r.inflight || len(r.queue) == 0 {
			continue
		}
		n := batchLen(r.queue, s.cfg.Budget, s.cfg.MaxBatchBytes)
		h := s.heads[r.name]
		d := &delivery{room: r.name, msgs: append([]pending(nil), r.queue[:n]...), drain: s.draining,
			urgent: r.high > 0, giveUp: r.failures >= s.cfg.GiveUpAfter, known: h.Head}
		r.queue = r.queue[n:]
		s.takeHigh(r, d, now)
		r.inflight = true
		s.inflight++
		if d.msgs[0].ev != nil || r.lane {
			s.work <- d // an event or a lane of notices opens no window
			continue
		}
		d.historySize = h.historySize(n, s.cfg)
		if len(r.queue) > 0 {
			s.m.deferred.Add(float64(len(r.queue)))
		}
		r.windowEnd = now.Add(s.cfg.Window)
		coalesced := 0
		for i := range d.msgs {
			if d.msgs[i].waited {
				coalesced++
				d.msgs[i].waited = false // a retry of the batch is not counted again
			}
		}
		s.m.coalesced.Add(float64(coalesced))
		s.work <- d // never blocks: capacity is Workers and inflight < Workers
	}
}

// batchLen is how many entries of a room's queue go in its next delivery:
// an event at the head alone, else the messages before the first event, at
// most budget, and no more than keep the push body within maxBytes (at
// least one message).
func batchLen(q []pending, budget, maxBytes int) int {
	if q[0].ev != nil {
		return 1
	}
	n := min(len(q), budget)
	size := batchOverhead + len(q[0].raw) + msgOverhead
	for i := 1; i < n; i++ {
		size += len(q[i].raw) + msgOverhead
		if q[i].ev != nil || size > maxBytes {
			return i
		}
	}
	return n
}

// What a push body adds to its messages' JSON: the frame's fields (op,
// room, epoch, dels, sv) and, per message, its position and a comma.
const (
	batchOverhead = 256
	msgOverhead   = len(`,"pos":9223372036854775807,`)
)

// complete applies a delivery's outcome: finished offsets, messages back to
// the front of the room's queue, backoff after a failure.
func (s *scheduler) complete(o outcome, now time.Time) {
	s.inflight--
	r := s.rooms[o.room]
	r.inflight = false
	if o.head.Epoch != "" {
		s.heads[o.room] = s.heads[o.room].advance(o.head, now, s.cfg.HistorySpan)
	}
	for _, p := range o.done {
		s.offsets.finished(p.part, p.off)
	}
	s.buffered -= len(o.done)
	o.retry = s.dropStale(o.retry)
	if len(o.retry) > 0 {
		r.queue = append(o.retry, r.queue...)
		r.high += countHigh(o.retry)
	}
	wait := o.wait
	if o.failed {
		r.failures++
		// Exponential backoff while Redis or a comet keeps failing.
		backoff := s.cfg.RetryMin << min(r.failures-1, 16)
		wait = max(wait, min(backoff, s.cfg.RetryMax))
	} else {
		r.failures = 0
	}
	if wait > 0 && now.Add(wait).After(r.windowEnd) {
		r.windowEnd = now.Add(wait)
	}
	if len(r.queue) == 0 {
		return
	}
	at := s.dueAt(r, now)
	if wait > 0 {
		at = r.windowEnd // a retry waits, even while draining
	}
	s.schedule(r, at)
}

// takeHigh takes the high-priority messages of d, just dispatched, off
// r's count and counts those that went out before r's window ended: the
// ones the high lane did not make wait.
func (s *scheduler) takeHigh(r *roomState, d *delivery, now time.Time) {
	if r.high == 0 {
		return
	}
	n := countHigh(d.msgs)
	r.high -= n
	if now.Before(r.windowEnd) {
		s.m.highEarly.Add(float64(n))
	}
}

// countHigh returns how many messages of ps are high priority.
func countHigh(ps []pending) int {
	n := 0
	for i := range ps {
		if ps[i].ev == nil && ps[i].notice == nil && ps[i].msg.Priority.High() {
			n++
		}
	}
	return n
}

// sweep forgets idle rooms whose window has ended, and timeline heads
// older than HistoryTTL.
func (s *scheduler) sweep(now time.Time) {
	for name, r := range s.rooms {
		if !r.inflight && len(r.queue) == 0 && len(r.held) == 0 && r.due.IsZero() && now.After(r.windowEnd) {
			delete(s.rooms, name)
		}
	}
	for name, h := range s.heads {
		if now.Sub(h.at) > s.cfg.HistoryTTL {
			delete(s.heads, name)
		}
	}
}

// dueHeap orders scheduled rooms by due time; entries whose time no longer
// matches the room's are stale and skipped.
type dueEntry struct {
	at   time.Time
	room *roomState
}
type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(a, b int) bool { return h[a].at.Before(h[b].at) }
func (h dueHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

var _ heap.Interface = (*dueHeap)(nil)

// newGeneration starts generation g of the group member: the messages
// fetched in an earlier one and not delivered yet are dropped, and each
// partition's offsets start over with its first record of g. Each partition of the new generation is fetched
// again from below its first unfinished record (consumer.resumeAt), so
// those of its messages come again; the others are another member's now,
// which delivers them. Delivered by this member later instead, they could
// go out long after the other member delivered them, when their claims
// have expired (ClaimTTL): with new positions, a second time to every
// viewer. A delivery in flight ends as it would have; its retry is
// dropped like the rest (complete).
func (s *scheduler) newGeneration(g int64) {
	first := s.gen == 0
	s.gen = g
	if first {
		return
	}
	for _, r := range s.rooms {
		r.queue = s.dropStale(r.queue)
		r.high = countHigh(r.queue)
		held := len(r.held)
		r.held = slices.DeleteFunc(r.held, func(h heldMsg) bool { return h.p.gen < g })
		s.buffered -= held - len(r.held)
		s.heldN -= held - len(r.held)
	}
}

// dropStale returns ps without the messages fetched before the current
// generation, which no longer count as buffered.
func (s *scheduler) dropStale(ps []pending) []pending {
	n := len(ps)
	ps = slices.DeleteFunc(ps, func(p pending) bool { return p.gen < s.gen })
	s.buffered -= n - len(ps)
	return ps
}
