package comet

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// roundTrips counts the client's round trips: one per command sent alone,
// one per pipeline.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// benchComet starts a comet on a redis-server of its own whose registry
// holds n viewers in rooms of 100 (routes only, no sockets: the repair
// reads nothing else).
func benchComet(b *testing.B, n int) (*Server, *redis.Client, *roundTrips) {
	srv := redisserver.New(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { rdb.Close() })
	// The comet's own client, counted; the benchmark's reads use rdb.
	crdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { crdb.Close() })
	trips := &roundTrips{}
	crdb.AddHook(trips)
	cfg := testConfig(b)
	s, err := New(cfg, Deps{Store: route.New(crdb)})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Shutdown(context.Background()) })
	s.reg.exclusive(func() {
		for i := range n {
			s.reg.hold(route.Conn{ID: fmt.Sprintf("c-bench-%d", i), Room: fmt.Sprintf("room-%d", i/100),
				User: fmt.Sprintf("u%d", i), Comet: s.ID()})
		}
	})
	return s, rdb, trips
}

// BenchmarkReregister measures the repair after Redis lost everything: one
// lease renewal that finds the lease gone and registers every viewer again.
func BenchmarkReregister(b *testing.B) {
	for _, n := range []int{1000, 15000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, rdb, trips := benchComet(b, n)
			ctx := context.Background()
			var cmds, rt int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := rdb.FlushAll(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				c0, t0 := redisserver.Commands(b, rdb), trips.n.Load()
				b.StartTimer()
				s.reg.exclusive(s.heartbeat)
				b.StopTimer()
				cmds, rt = cmds+redisserver.Commands(b, rdb)-c0, rt+trips.n.Load()-t0
				if got, err := rdb.HLen(ctx, "comet:connections:{"+s.ID()+"}").Result(); err != nil || got != int64(n) {
					b.Fatalf("index lists %d (%v), want %d", got, err, n)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cmds)/float64(b.N), "commands/op")
			b.ReportMetric(float64(rt)/float64(b.N), "roundtrips/op")
		})
	}
}

// BenchmarkReconcileClean measures the periodic anti-entropy pass of a
// comet whose routes are all right.
func BenchmarkReconcileClean(b *testing.B) {
	for _, n := range []int{1000, 15000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, rdb, trips := benchComet(b, n)
			s.reg.exclusive(func() { s.reregister(s.reg.heldConns(), false) })
			var cmds, rt int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				c0, t0 := redisserver.Commands(b, rdb), trips.n.Load()
				b.StartTimer()
				s.reg.exclusive(func() { s.reconcile("bench") })
				b.StopTimer()
				cmds, rt = cmds+redisserver.Commands(b, rdb)-c0, rt+trips.n.Load()-t0
				b.StartTimer()
			}
			b.ReportMetric(float64(cmds)/float64(b.N), "commands/op")
			b.ReportMetric(float64(rt)/float64(b.N), "roundtrips/op")
		})
	}
}
