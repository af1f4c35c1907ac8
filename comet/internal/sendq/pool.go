package sendq

import (
	"sync"
	"sync/atomic"
	"time"
)

// drains runs the writers' drains on long-lived goroutines. A goroutine
// started for each drain begins with the runtime's smallest stack and
// grows it (morestack, copying the stack) on its way down to the socket
// write, every time; in a hot room every viewer starts a drain for every
// frame. A worker of the pool keeps its grown stack between drains.
//
// A drain is handed to a parked worker when one waits, or else runs on a
// new worker, so a drain never waits for another (a slow viewer's drain
// blocks in its write for up to the write deadline). After each drain the
// worker parks for the next one. Once a trim period, workers beyond the
// most drains that ran at once during the period exit, so an idle comet
// keeps none.
var drains = drainPool{tasks: make(chan func())}

// trimPeriod is how often the pool lets go of the workers it did not
// need.
const trimPeriod = 2 * time.Second

type drainPool struct {
	tasks chan func() // a nil task makes a worker exit
	idle  atomic.Int64
	busy  atomic.Int64
	peak  atomic.Int64 // most drains running at once since the last trim
	once  sync.Once
}

// run runs f on a worker.
func (p *drainPool) run(f func()) {
	p.once.Do(func() { go p.trimLoop() })
	select {
	case p.tasks <- f:
	default:
		go p.work(f)
	}
}

// work runs f, then the drains handed to it, until told to exit.
func (p *drainPool) work(f func()) {
	for f != nil {
		n := p.busy.Add(1)
		for pk := p.peak.Load(); n > pk && !p.peak.CompareAndSwap(pk, n); pk = p.peak.Load() {
		}
		f()
		p.busy.Add(-1)
		p.idle.Add(1)
		f = <-p.tasks
		p.idle.Add(-1)
	}
}

// trimLoop lets the workers beyond the last period's peak exit.
func (p *drainPool) trimLoop() {
	t := time.NewTicker(trimPeriod)
	defer t.Stop()
	for range t.C {
		p.trim()
	}
}

// trim tells the idle workers beyond the peak of drains since the last
// trim to exit, and starts a new period.
func (p *drainPool) trim() {
	keep := p.peak.Swap(p.busy.Load())
	for extra := p.idle.Load() - keep; extra > 0; extra-- {
		select {
		case p.tasks <- nil:
		default:
			return
		}
	}
}
