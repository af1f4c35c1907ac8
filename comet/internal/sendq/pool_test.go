package sendq

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
)

// A drain goes to a parked worker when one waits, else to a new one;
// drains never wait for each other; trim lets go of the workers beyond
// the period's peak, all of them after a period without drains.
func TestDrainPool(t *testing.T) {
	p := &drainPool{tasks: make(chan func())}
	p.once.Do(func() {}) // trims are the test's
	// idle waits until want workers are parked and none is busy.
	idle := func(want int64) {
		t.Helper()
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			if n, b := p.idle.Load(), p.busy.Load(); n != want || b != 0 {
				return fmt.Errorf("%d idle workers, %d busy; want %d idle", n, b, want)
			}
			return nil
		})
	}
	// drain runs one drain and waits for it.
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
	if p.busy.Load() != 3 || p.peak.Load() != 3 {
		t.Fatalf("busy %d, peak %d; want 3", p.busy.Load(), p.peak.Load())
	}
	close(release)
	idle(3)
	// The next drain reuses a parked worker.
	drain()
	idle(3)
	p.trim() // the period's peak was 3: all stay
	idle(3)
	drain()
	idle(3)
	p.trim() // peak 1: two go
	idle(1)
	p.trim() // no drain in the period: the last goes
	idle(0)
}
