package comet

import (
	"context"
	"errors"
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
type registry struct {
	rt      *route.Store
	comet   string
	timeout time.Duration
	log     *zap.Logger
	metrics *metrics

	jobs chan func()
	wg   sync.WaitGroup
	// gate is held shared by every worker call and alone by a repair.
	gate sync.RWMutex

	mu   sync.Mutex // guards held
	held map[string]route.Conn
	// heldN is len(held), for the metrics (shared with the Server).
	heldN *atomic.Int64
}

func newRegistry(rt *route.Store, comet string, timeout time.Duration, workers int, log *zap.Logger, m *metrics, heldN *atomic.Int64) *registry {
	r := &registry{rt: rt, comet: comet, timeout: timeout, log: log, metrics: m,
		jobs: make(chan func(), 4096), held: map[string]route.Conn{}, heldN: heldN}
	r.wg.Add(workers)
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
	return r
}

// stop runs the queued jobs and ends the workers. No job may be submitted
// afterwards.
func (r *registry) stop() {
	close(r.jobs)
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

// drop forgets the route of connection id while it names room (any room
// when room is empty).
func (r *registry) drop(id, room string) {
	r.mu.Lock()
	if h, ok := r.held[id]; ok && (room == "" || h.Room == room) {
		delete(r.held, id)
		r.heldN.Store(int64(len(r.held)))
	}
	r.mu.Unlock()
}

func (r *registry) routeConn(c *conn, room string) route.Conn {
	return route.Conn{ID: c.id, Room: room, User: c.user, Comet: r.comet}
}

type moveResult struct {
	online int64
	err    error
}

// move unregisters c from old (if any), registers it in room and returns the
// room's online count including c. It waits for the result. A failed move
// leaves c out of held: whatever part of it reached Redis is undone by the
// next reconcile, or by the unregister the failure leads to.
func (r *registry) move(c *conn, old, room string) (int64, error) {
	done := make(chan moveResult, 1)
	r.jobs <- func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		if old != "" && old != room {
			if err := r.rt.Unregister(ctx, r.routeConn(c, old)); err != nil {
				r.drop(c.id, "")
				r.metrics.registryError()
				done <- moveResult{err: err}
				return
			}
		}
		rc := r.routeConn(c, room)
		if err := r.rt.Register(ctx, rc); err != nil {
			r.drop(c.id, "")
			var banned *route.BanError
			if !errors.As(err, &banned) {
				r.metrics.registryError() // a ban is an answer, not a failure
			}
			done <- moveResult{err: err}
			return
		}
		r.hold(rc)
		n, err := r.rt.Online(ctx, room)
		if err != nil {
			// Registered but not counted: the welcome still goes out.
			r.metrics.registryError()
			n = 1
		}
		done <- moveResult{online: n}
	}
	res := <-done
	return res.online, res.err
}

// unregisterAsync removes c's route in room without waiting. The route
// leaves held whether or not Redis answers: a route left behind is removed
// by the next reconcile.
func (r *registry) unregisterAsync(c *conn, room string) {
	rc := r.routeConn(c, room)
	r.jobs <- func() {
		r.drop(rc.ID, rc.Room)
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		if err := r.rt.Unregister(ctx, rc); err != nil {
			r.metrics.registryError()
			r.log.Warn("unregister viewer", zap.String("conn", rc.ID), zap.String("room", rc.Room), zap.Error(err))
		}
	}
}
