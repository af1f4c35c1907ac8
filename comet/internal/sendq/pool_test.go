package sendq

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
)

// newTestPool returns a pool running base drains at once, whose trims
// are the test's.
func newTestPool(base int) *drainPool {
	p := &drainPool{tasks: make(chan func())}
	p.once.Do(func() { p.setup(base) })
	return p
}

// counts returns the pool's parked and busy workers and its backlog.
func (p *drainPool) counts() (parked, busy, backlog int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parked, p.busy, len(p.backlog)
}

// waitCounts waits until p has parked and busy workers, nothing in the
// backlog.
func waitCounts(t *testing.T, p *drainPool, parked, busy int) {
	t.Helper()
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if n, b, q := p.counts(); n != parked || b != busy || q != 0 {
			return fmt.Errorf("%d parked, %d busy, %d waiting; want %d parked, %d busy", n, b, q, parked, busy)
		}
		return nil
	})
}

// A drain goes to a parked worker when one waits, else to a new one
// while fewer than base are busy; trim lets go of the workers beyond
// the period's peak, all of them after a period without drains.
func TestDrainPool(t *testing.T) {
	p := newTestPool(8)
	drain := func() {
		done := make(chan struct{})
		p.run(func() { close(done) })
		<-done
	}
	// Three drains at once, each blocked: three workers.
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(3)
	for range 3 {
		p.run(func() { started.Done(); <-release })
	}
	started.Wait()
	waitCounts(t, p, 0, 3)
	close(release)
	waitCounts(t, p, 3, 0)
	// The next drain reuses a parked worker.
	drain()
	waitCounts(t, p, 3, 0)
	p.trim() // the period's peak was 3: all stay
	waitCounts(t, p, 3, 0)
	drain()
	waitCounts(t, p, 3, 0)
	p.trim() // peak 1: two go
	waitCounts(t, p, 1, 0)
	p.trim() // no drain in the period: the last goes
	waitCounts(t, p, 0, 0)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.workers) != 0 {
			return fmt.Errorf("%d workers left", len(p.workers))
		}
		return nil
	})
}

// Beyond base busy workers drains wait in the backlog and run in the
// order they came as workers free up; a worker held by one drain for
// longer than stallAfter (a viewer that does not read) gets a stand-in,
// so the backlog moves on without it.
func TestDrainPoolBacklog(t *testing.T) {
	p := newTestPool(1)
	var mu sync.Mutex
	var order []int
	gate := make(chan struct{})
	for i := range 6 {
		p.run(func() {
			<-gate
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	if _, busy, backlog := p.counts(); busy != 1 || backlog != 5 {
		t.Fatalf("busy %d, backlog %d; want 1 and 5", busy, backlog)
	}
	close(gate)
	waitCounts(t, p, 1, 0)
	mu.Lock()
	if fmt.Sprint(order) != "[0 1 2 3 4 5]" {
		t.Fatalf("ran in order %v", order)
	}
	mu.Unlock()
	// Two drains held by viewers that do not read: the four behind them
	// still run, on stand-ins.
	stuck := make(chan struct{})
	defer close(stuck)
	for range 2 {
		p.run(func() { <-stuck })
	}
	var done sync.WaitGroup
	done.Add(4)
	for range 4 {
		p.run(done.Done)
	}
	waited := make(chan struct{})
	go func() { done.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		_, busy, backlog := p.counts()
		t.Fatalf("drains behind two held workers did not run: %d busy, %d waiting", busy, backlog)
	}
}
