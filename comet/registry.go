package comet

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/route"
)

// registry performs the Redis registrations of viewers on a small pool of
// worker goroutines. Readers hand their calls over and wait on a channel:
// their own stacks stay shallow (an idle viewer costs less memory), and the
// number of concurrent Redis calls is bounded whatever the number of
// viewers joining at once. Broadcasts never touch it.
type registry struct {
	rt      *route.Store
	comet   string
	timeout time.Duration
	log     *zap.Logger
	metrics *metrics

	jobs chan func()
	wg   sync.WaitGroup
}

func newRegistry(rt *route.Store, comet string, timeout time.Duration, workers int, log *zap.Logger, m *metrics) *registry {
	r := &registry{rt: rt, comet: comet, timeout: timeout, log: log, metrics: m, jobs: make(chan func(), 4096)}
	r.wg.Add(workers)
	for range workers {
		go func() {
			defer r.wg.Done()
			for job := range r.jobs {
				job()
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

func (r *registry) routeConn(c *conn, room string) route.Conn {
	return route.Conn{ID: c.id, Room: room, User: c.user, Comet: r.comet}
}

type moveResult struct {
	online int64
	err    error
}

// move unregisters c from old (if any), registers it in room and returns the
// room's online count including c. It waits for the result.
func (r *registry) move(c *conn, old, room string) (int64, error) {
	done := make(chan moveResult, 1)
	r.jobs <- func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		if old != "" && old != room {
			if err := r.rt.Unregister(ctx, r.routeConn(c, old)); err != nil {
				r.metrics.registryError()
				done <- moveResult{err: err}
				return
			}
		}
		if err := r.rt.Register(ctx, r.routeConn(c, room)); err != nil {
			r.metrics.registryError()
			done <- moveResult{err: err}
			return
		}
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

// unregisterAsync removes c's route in room without waiting.
func (r *registry) unregisterAsync(c *conn, room string) {
	rc := r.routeConn(c, room)
	r.jobs <- func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		if err := r.rt.Unregister(ctx, rc); err != nil {
			r.metrics.registryError()
			r.log.Warn("unregister viewer", zap.String("conn", rc.ID), zap.String("room", rc.Room), zap.Error(err))
		}
	}
}
