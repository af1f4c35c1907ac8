package comet

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/route"
)

// registry performs the Redis registrations of viewers on a small pool of
// worker goroutines. Readers hand their calls over and wait on a channel:
// their own stacks stay shallow (an idle viewer costs less memory), and the
// number of concurrent Redis calls is bounded whatever the number of
// viewers joining at once. Broadcasts never touch it.
//
// It also keeps held, the routes it has registered and not unregistered:
// what the comet holds as Redis should see it. A bulk repair (exclusive)
// compares Redis with held while no worker runs a call, so a repair never
// interleaves with this comet's own Register or Unregister of the same
// connection.
//
// Ownership: rt, comet, timeout, log and metrics never change; jobs and
// regs carry work from readers to the workers; mu guards held, which the
// workers change and the repairs (lease loop, under gate) read.
type registry struct {
	rt      Store
	comet   string
	timeout time.Duration
	log     *zap.Logger
	metrics *metrics

	jobs chan func()
	// regs are the registrations waiting; the workers take them in batches
	// (see registerBatch).
	regs chan regRequest
	wg   sync.WaitGroup
	// gate is held shared by every worker call and alone by a repair.
	gate sync.RWMutex

	// unsure is set when a registration or unregistration failed (timed
	// out, Redis did not answer): what it left in Redis is unknown, and the
	// next lease renewal reconciles (Server.heartbeat).
	unsure atomic.Bool

	mu   sync.Mutex // guards held
	held map[string]route.Conn
	// heldN is len(held), for the metrics (shared with the Server).
	heldN *atomic.Int64
}

func newRegistry(rt Store, comet string, timeout time.Duration, workers int, log *zap.Logger, m *metrics, heldN *atomic.Int64) *registry {
	r := &registry{rt: rt, comet: comet, timeout: timeout, log: log, metrics: m,
		jobs: make(chan func(), 4096), regs: make(chan regRequest, 4096),
		held: map[string]route.Conn{}, heldN: heldN}
	r.wg.Add(workers + registerWorkers)
	for range workers {
		go func() {
			defer r.wg.Done()
			for job := range r.jobs {
				r.gate.RLock()
				job()
				r.gate.RUnlock()
			}
		}()
	}
	for range registerWorkers {
		go func() {
			defer r.wg.Done()
			r.registerLoop()
		}()
	}
	return r
}

// stop runs the queued jobs and ends the workers. No job may be submitted
// afterwards.
func (r *registry) stop() {
	close(r.jobs)
	close(r.regs)
	r.wg.Wait()
}

// exclusive runs fn once no worker is inside a registry call, and keeps the
// workers out until it returns: joins and leaves queue up meanwhile.
func (r *registry) exclusive(fn func()) {
	r.gate.Lock()
	defer r.gate.Unlock()
	fn()
}

// heldConns returns a copy of the routes the registry holds.
func (r *registry) heldConns() []route.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]route.Conn, 0, len(r.held))
	for _, c := range r.held {
		out = append(out, c)
	}
	return out
}

// hold records rc as registered.
func (r *registry) hold(rc route.Conn) {
	r.mu.Lock()
	r.held[rc.ID] = rc
	r.heldN.Store(int64(len(r.held)))
	r.mu.Unlock()
}

// drop forgets the route id while it names room.
func (r *registry) drop(id, room string) {
	r.mu.Lock()
	if h, ok := r.held[id]; ok && h.Room == room {
		delete(r.held, id)
		r.heldN.Store(int64(len(r.held)))
	}
	r.mu.Unlock()
}

// routeConn is m as the registry knows it: one room of a connection,
// under the member's own id.
func (r *registry) routeConn(m *member) route.Conn {
	return route.Conn{ID: m.reg, Room: m.room, User: m.c.user, Comet: r.comet}
}

type registerResult struct {
	online int64
	err    error
}

// regRequest is one registration waiting for a worker.
type regRequest struct {
	rc   route.Conn
	done chan registerResult
}

// Registrations go out in batches: a worker takes every registration
// waiting, up to registerBatch, and makes them in one round trip (route
// RegisterMany). A crowd of viewers arriving at once (a comet's viewers
// moving to another after a crash) so costs a few round trips, where one
// per viewer would keep most of them waiting for their welcome behind
// the others' round trips.
const (
	registerWorkers = 4
	registerBatch   = 256
)

// register records m in Redis and returns the room's online count
// including m. It waits for the result. A failed registration leaves m out
// of held: whatever part of it reached Redis is undone by the unregister
// the failure leads to, or by the reconcile at the next lease renewal.
func (r *registry) register(m *member) (int64, error) {
	done := make(chan registerResult, 1)
	r.regs <- regRequest{rc: r.routeConn(m), done: done}
	res := <-done
	return res.online, res.err
}

// registerLoop is a registration worker: it takes a registration, then
// every other one waiting (up to registerBatch), and makes them together.
func (r *registry) registerLoop() {
	var batch []regRequest
	for req := range r.regs {
		batch = append(batch[:0], req)
	more:
		for len(batch) < registerBatch {
			select {
			case q, ok := <-r.regs:
				if !ok {
					break more
				}
				batch = append(batch, q)
			default:
				break more
			}
		}
		r.gate.RLock()
		r.registerBatch(batch)
		r.gate.RUnlock()
		clear(batch)
	}
}

// registerBatch makes the registrations of batch in one call and answers
// each. A user banned from the room is an answer, not a failure.
func (r *registry) registerBatch(batch []regRequest) {
	conns := make([]route.Conn, len(batch))
	for i, q := range batch {
		conns[i] = q.rc
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	regs, err := r.rt.RegisterMany(ctx, conns)
	cancel()
	if err != nil {
		r.metrics.registryError() // one failed call, whatever its size
		r.unsure.Store(true)
	}
	for i, q := range batch {
		if err != nil {
			q.done <- registerResult{err: err}
			continue
		}
		if regs[i].Err != nil {
			q.done <- registerResult{err: regs[i].Err}
			continue
		}
		r.hold(q.rc)
		q.done <- registerResult{online: regs[i].Online}
	}
}

// online returns room's online count (1 when Redis does not answer: the
// asking viewer is there). It waits for the result.
func (r *registry) online(room string) int64 {
	done := make(chan int64, 1)
	r.jobs <- func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		n, err := r.rt.Online(ctx, room)
		if err != nil {
			r.metrics.registryError()
			n = 1
		}
		done <- n
	}
	return <-done
}

// unregisterAsync removes m's registration without waiting. The route
// leaves held whether or not Redis answers: a route left behind is removed
// by the reconcile at the next lease renewal.
func (r *registry) unregisterAsync(m *member) {
	rc := r.routeConn(m)
	r.jobs <- func() {
		r.drop(rc.ID, rc.Room)
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		if err := r.rt.Unregister(ctx, rc); err != nil {
			r.metrics.registryError()
			r.unsure.Store(true)
			r.log.Warn("unregister viewer", zap.String("conn", rc.ID), zap.String("room", rc.Room), zap.Error(err))
		}
	}
}
