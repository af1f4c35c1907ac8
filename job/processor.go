package job

import (
	"container/heap"
	"time"
)

// processor owns all room state. It runs on one goroutine, so rooms,
// buffers, schedules and offsets need no locks; Redis and comet calls run on
// the workers and come back as results.
type processor struct {
	j        *Job
	cfg      Config
	rooms    map[string]*roomState
	due      dueHeap
	ready    []*roomState
	offsets  *offsets
	buffered int // messages held over all rooms
	inflight int
	draining bool
	drainBy  time.Time
}

func newProcessor(j *Job) *processor {
	return &processor{j: j, cfg: j.cfg, rooms: map[string]*roomState{}, offsets: newOffsets()}
}

// run processes until stop is closed and buffered messages are delivered
// (or the drain deadline passed), or until the job is aborted.
func (p *processor) run(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	commit := time.NewTicker(p.cfg.CommitInterval)
	defer commit.Stop()
	sweep := time.NewTicker(5 * time.Second)
	defer sweep.Stop()
	in := p.j.in
	for {
		var input <-chan record
		if in != nil && p.buffered < p.cfg.MaxBuffered {
			input = in
		}
		select {
		case r, ok := <-input:
			if !ok {
				in = nil
				p.startDrain()
				break
			}
			p.accept(r, time.Now())
		case f := <-p.j.results:
			p.complete(f, time.Now())
		case <-timer.C:
		case <-commit.C:
			p.j.queueCommits(p.offsets.commits())
			p.j.m.pending.Set(float64(p.buffered))
		case <-sweep.C:
			p.sweep(time.Now())
		case <-stop:
			stop = nil
			p.startDrain()
		case <-p.j.aborted:
			p.waitInflight()
			return
		}
		now := time.Now()
		p.promote(now)
		p.dispatchReady(now)
		if p.draining && (p.inflight == 0 && (p.buffered == 0 || now.After(p.drainBy))) {
			return
		}
		next := time.Hour
		if p.due.Len() > 0 {
			next = max(p.due[0].at.Sub(now), 0)
		}
		if p.draining {
			next = min(next, max(p.drainBy.Sub(now), 0)+time.Millisecond)
		}
		timer.Reset(next)
	}
}

// startDrain makes every buffered room due now, ignoring windows: shutdown
// delivers what it holds instead of waiting.
func (p *processor) startDrain() {
	if p.draining {
		return
	}
	p.draining = true
	p.drainBy = time.Now().Add(p.cfg.DrainTimeout)
	now := time.Now()
	for _, r := range p.rooms {
		if len(r.queue) > 0 && !r.inflight {
			r.due = time.Time{}
			p.schedule(r, now)
		}
	}
}

// waitInflight collects the results of deliveries still running after an
// abort, so workers can exit; their outcome is discarded, as in a crash.
func (p *processor) waitInflight() {
	for p.inflight > 0 {
		<-p.j.results
		p.inflight--
	}
}

func (p *processor) room(name string) *roomState {
	r := p.rooms[name]
	if r == nil {
		r = &roomState{name: name}
		p.rooms[name] = r
	}
	return r
}

// accept takes one consumed record.
func (p *processor) accept(rec record, now time.Time) {
	m := p.j.m
	m.consumed.Inc()
	p.offsets.consumed(rec.part, rec.off)
	if rec.err != nil {
		m.invalid.Inc()
		p.offsets.finished(rec.part, rec.off)
		return
	}
	r := p.room(rec.env.Room)
	if p.cfg.Policy == PolicyDrop {
		// The original semantics: one message per window, the rest skipped.
		if r.inflight || len(r.queue) > 0 || now.Before(r.windowEnd) {
			m.dropped.WithLabelValues("cooldown").Inc()
			p.offsets.finished(rec.part, rec.off)
			return
		}
	} else if len(r.queue) >= p.cfg.MaxPending && r.failures == 0 {
		m.dropped.WithLabelValues("overflow").Inc()
		p.offsets.finished(rec.part, rec.off)
		return
	}
	waited := r.inflight || len(r.queue) > 0 || now.Before(r.windowEnd)
	r.queue = append(r.queue, pending{msg: rec.env.Msg, part: rec.part, off: rec.off, waited: waited})
	p.buffered++
	if !r.inflight {
		at := now
		if !p.draining && r.windowEnd.After(at) {
			at = r.windowEnd
		}
		p.schedule(r, at)
	}
}

// schedule makes r due at t unless it is already due earlier.
func (p *processor) schedule(r *roomState, t time.Time) {
	if !r.due.IsZero() && !t.Before(r.due) {
		return
	}
	r.due = t
	heap.Push(&p.due, dueEntry{at: t, room: r})
}

// promote moves rooms whose time has come to the ready list.
func (p *processor) promote(now time.Time) {
	for p.due.Len() > 0 && !p.due[0].at.After(now) {
		e := heap.Pop(&p.due).(dueEntry)
		if !e.room.due.Equal(e.at) {
			continue // rescheduled since
		}
		e.room.due = time.Time{}
		p.ready = append(p.ready, e.room)
	}
}

// dispatchReady hands ready rooms to free workers, oldest first.
func (p *processor) dispatchReady(now time.Time) {
	for len(p.ready) > 0 && p.inflight < p.cfg.Workers {
		r := p.ready[0]
		p.ready = p.ready[1:]
		if r.inflight || len(r.queue) == 0 {
			continue
		}
		n := min(len(r.queue), p.cfg.Budget)
		f := &flush{room: r.name, batch: append([]pending(nil), r.queue[:n]...), final: p.draining,
			giveUp: r.failures >= p.cfg.GiveUpAfter}
		r.queue = r.queue[n:]
		if len(r.queue) > 0 {
			p.j.m.deferred.Add(float64(len(r.queue)))
		}
		r.inflight = true
		r.windowEnd = now.Add(p.cfg.Window)
		coalesced := 0
		for i := range f.batch {
			if f.batch[i].waited {
				coalesced++
				f.batch[i].waited = false // a retry of the batch is not counted again
			}
		}
		p.j.m.coalesced.Add(float64(coalesced))
		p.inflight++
		p.j.work <- f // never blocks: capacity is Workers and inflight < Workers
	}
}

// complete applies a delivery's outcome.
func (p *processor) complete(f *flush, now time.Time) {
	p.inflight--
	r := p.rooms[f.room]
	r.inflight = false
	for _, i := range f.finished {
		p.offsets.finished(f.batch[i].part, f.batch[i].off)
	}
	p.buffered -= len(f.finished)
	if len(f.requeue) > 0 {
		back := make([]pending, 0, len(f.requeue)+len(r.queue))
		for _, i := range f.requeue {
			back = append(back, f.batch[i])
		}
		r.queue = append(back, r.queue...)
	}
	if f.failed {
		r.failures++
		// Exponential backoff while Redis or a comet keeps failing.
		backoff := p.cfg.RetryMin << min(r.failures-1, 16)
		f.wait = max(f.wait, min(backoff, p.cfg.RetryMax))
	} else {
		r.failures = 0
	}
	if f.wait > 0 && now.Add(f.wait).After(r.windowEnd) {
		r.windowEnd = now.Add(f.wait)
	}
	if len(r.queue) == 0 {
		return
	}
	at := r.windowEnd
	if p.draining && f.wait == 0 {
		at = now
	}
	p.schedule(r, at)
}

// sweep forgets idle rooms whose window has ended.
func (p *processor) sweep(now time.Time) {
	for name, r := range p.rooms {
		if !r.inflight && len(r.queue) == 0 && r.due.IsZero() && now.After(r.windowEnd) {
			delete(p.rooms, name)
		}
	}
}
