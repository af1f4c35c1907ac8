package job

import (
	"container/heap"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
)

// Held messages (a room's non-moderator delay, danmaku.Envelope.HoldMs).
// A message consumed with a hold waits in its room's held list, outside
// the room's queue, until its TS plus its hold (logic's clock, so a
// redelivery after a crash holds it only for what is left); then it joins
// the queue like a message just consumed and gets its position with the
// room's next delivery. Messages consumed without a hold (high priority,
// moderators) do not wait behind held ones. A del event consumed while a
// message it names is held drops the message: it never gets a position,
// so no viewer and no history ever has it. The drop is also safe against
// a crash: logic marks the ids of a delete done in Redis before the event
// is written (route.MarkDeleted), so a redelivered message finds its
// claim taken and gets no position whichever of the two job reads first.
//
// A held message is buffered like any other: its offset is not finished,
// so its partition is not committed past it until it is delivered or
// dropped, and a job that dies while holding it redelivers it. Shutdown
// does not wait for held messages (the next member holds them again).
//
// Every message held is also listed in Redis for moderators (heldlist.go),
// who delete it there before its release.

func newHeldCounter(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_held_total",
		Help: "Messages held for their room's non-moderator delay before their delivery."})
	reg.MustRegister(c)
	return c
}

// heldMsg is a message waiting for its release time.
type heldMsg struct {
	p  pending
	at time.Time
}

// holdUntil is when a message of env is released: zero when it is not
// held (no hold, a high-priority message, or its time has come).
func holdUntil(env danmaku.Envelope, now time.Time) time.Time {
	if env.HoldMs <= 0 || env.Msg.Priority.High() {
		return time.Time{}
	}
	at := time.UnixMilli(env.Msg.TS + env.HoldMs)
	if !at.After(now) {
		return time.Time{}
	}
	return at
}

// hold puts p in r's held list until at, in release order.
func (s *scheduler) hold(r *roomState, p pending, at time.Time) {
	i := len(r.held)
	for i > 0 && r.held[i-1].at.After(at) {
		i--
	}
	r.held = slices.Insert(r.held, i, heldMsg{p: p, at: at})
	s.buffered++
	s.heldN++
	s.m.held.Inc()
	if s.heldList != nil {
		s.heldList.add(r.name, p.msg, at)
	}
	if i == 0 {
		heap.Push(&s.holds, dueEntry{at: at, room: r})
	}
}

// release moves the held messages whose time has come into their rooms'
// queues, in release order.
func (s *scheduler) release(now time.Time) {
	for s.holds.Len() > 0 && !s.holds[0].at.After(now) {
		r := heap.Pop(&s.holds).(dueEntry).room
		n := 0
		for n < len(r.held) && !r.held[n].at.After(now) {
			n++
		}
		if n == 0 {
			continue // released already: a stale entry
		}
		for _, h := range r.held[:n] {
			s.buffered--
			s.heldN--
			s.enqueue(r, h.p, false, now)
		}
		r.held = slices.Delete(r.held, 0, n)
		if len(r.held) > 0 {
			heap.Push(&s.holds, dueEntry{at: r.held[0].at, room: r})
		}
	}
}

// dropDeleted drops the held messages of r that a del event names: they
// are finished without a position (counted, reason "deleted").
func (s *scheduler) dropDeleted(r *roomState, ev *danmaku.Event) {
	if len(r.held) == 0 || ev.Op != danmaku.OpDel {
		return
	}
	r.held = slices.DeleteFunc(r.held, func(h heldMsg) bool {
		if !slices.Contains(ev.IDs, h.p.msg.ID) {
			return false
		}
		s.offsets.finished(h.p.part, h.p.off)
		s.buffered--
		s.heldN--
		s.m.dropped.WithLabelValues("deleted").Inc()
		return true
	})
	// A stale heap entry for the old head is skipped by release.
	if len(r.held) > 0 {
		heap.Push(&s.holds, dueEntry{at: r.held[0].at, room: r})
	}
}
