package sendq

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// drains runs the writers' drains on long-lived workers, a few per core.
//
// A drain that started a goroutine of its own would begin with the
// runtime's smallest stack and grow it on its way down to the socket
// write, every time; a worker keeps its grown stack between drains. And
// a room's fan-out starts a drain for every viewer at once: were they
// all runnable goroutines, the scheduler's run queues would hold
// thousands of socket writes, and everything else the comet does (the
// next push's request, a joiner, a timer) would wait behind all of them.
// So at most base drains run at once; the rest wait in the backlog, in
// the order they came, and a worker that finishes one takes the next
// without parking. A viewer with several frames queued by then gets
// them in one write (RunSink).
//
// A drain blocks in its socket write as long as the viewer does not read
// (up to the write deadline). So that such viewers cannot hold the
// workers, the pool watches the backlog while it holds drains: every
// stallAfter, for each worker whose drain has run longer than that, it
// starts another. An idle comet keeps no worker: once a trim period,
// workers beyond the most that ran at once during the period exit.
var drains = &drainPool{tasks: make(chan func())}

const (
	// trimPeriod is how often the pool lets go of the workers it did not
	// need.
	trimPeriod = 2 * time.Second
	// stallAfter is how long a drain runs before the pool counts its
	// worker as held by a viewer that does not read.
	stallAfter = 10 * time.Millisecond
	// workersPerCore is base for each core (GOMAXPROCS): enough to keep
	// the cores busy while some drains wait for a socket.
	workersPerCore = 8
)

type drainPool struct {
	tasks chan func() // hands a drain to a parked worker; nil makes it exit
	once  sync.Once

	mu      sync.Mutex // guards the fields below
	base    int        // drains run at once before the backlog is used
	backlog []func()   // drains waiting for a worker, oldest first
	workers []*worker  // every live worker
	busy    int        // workers running a drain
	parked  int        // workers waiting on tasks
	peak    int        // most workers busy at once since the last trim
	watch   *time.Timer
	watched bool // watch is armed
}

// worker is one worker of the pool: since is when the drain it runs
// started (UnixNano), 0 while it has none.
type worker struct{ since atomic.Int64 }

// Then runs f on a worker of the drain pool once the drains started
// before it have been handed to workers.
func Then(f func()) { drains.run(f) }

// run runs f on a worker: a parked one, a new one while fewer than base
// are busy, else the first to be free.
func (p *drainPool) run(f func()) {
	p.once.Do(p.start)
	p.mu.Lock()
	switch {
	case p.parked > 0:
		p.parked--
		p.busyLocked()
		p.mu.Unlock()
		p.tasks <- f
		return
	case p.busy < p.base:
		w := p.spawnLocked()
		p.mu.Unlock()
		go p.work(w, f)
		return
	}
	p.backlog = append(p.backlog, f)
	if !p.watched {
		p.watched = true
		p.watch.Reset(stallAfter)
	}
	p.mu.Unlock()
}

// start sets the pool up on its first use.
func (p *drainPool) start() {
	p.setup(workersPerCore * runtime.GOMAXPROCS(0))
	go p.trimLoop()
}

// setup makes base the drains run at once before the backlog is used.
func (p *drainPool) setup(base int) {
	p.mu.Lock()
	p.base = base
	p.watch = time.AfterFunc(time.Hour, p.check)
	p.watch.Stop()
	p.mu.Unlock()
}

// busyLocked counts one more busy worker; p.mu is held.
func (p *drainPool) busyLocked() {
	p.busy++
	p.peak = max(p.peak, p.busy)
}

// spawnLocked adds a busy worker; p.mu is held. The caller starts it.
func (p *drainPool) spawnLocked() *worker {
	w := &worker{}
	p.workers = append(p.workers, w)
	p.busyLocked()
	return w
}

// work runs f, then the drains of the backlog, then those handed to it
// while parked, until told to exit.
func (p *drainPool) work(w *worker, f func()) {
	for f != nil {
		w.since.Store(time.Now().UnixNano())
		f()
		w.since.Store(0)
		p.mu.Lock()
		if f = p.popLocked(); f != nil {
			p.mu.Unlock()
			continue
		}
		p.busy--
		p.parked++
		p.mu.Unlock()
		f = <-p.tasks
	}
	p.mu.Lock()
	for i, o := range p.workers {
		if o == w {
			last := len(p.workers) - 1
			p.workers[i], p.workers[last] = p.workers[last], nil
			p.workers = p.workers[:last]
			break
		}
	}
	p.mu.Unlock()
}

// popLocked takes the oldest drain of the backlog, or nil; p.mu is held.
func (p *drainPool) popLocked() func() {
	if len(p.backlog) == 0 {
		return nil
	}
	f := p.backlog[0]
	p.backlog[0] = nil
	p.backlog = p.backlog[1:]
	if len(p.backlog) == 0 {
		p.backlog = nil
	}
	return f
}

// check runs every stallAfter while the backlog holds drains: it starts
// a worker for each one held longer than that by a drain, up to what the
// backlog holds.
func (p *drainPool) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.backlog) == 0 {
		p.watched = false
		return
	}
	now := time.Now().UnixNano()
	held := 0
	for _, w := range p.workers {
		if s := w.since.Load(); s != 0 && now-s > int64(stallAfter) {
			held++
		}
	}
	for n := p.base - (p.busy - held); n > 0 && len(p.backlog) > 0; n-- {
		f := p.popLocked()
		w := p.spawnLocked()
		go p.work(w, f)
	}
	p.watch.Reset(stallAfter)
}

// trimLoop lets the workers beyond the last period's peak exit.
func (p *drainPool) trimLoop() {
	t := time.NewTicker(trimPeriod)
	defer t.Stop()
	for range t.C {
		p.trim()
	}
}

// trim tells the parked workers beyond the peak of busy ones since the
// last trim to exit, and starts a new period.
func (p *drainPool) trim() {
	p.mu.Lock()
	keep := p.peak
	p.peak = p.busy
	n := max(p.parked-keep, 0)
	p.parked -= n
	p.mu.Unlock()
	for range n {
		p.tasks <- nil
	}
}
