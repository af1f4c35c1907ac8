package route_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// trips counts the client's sequential round trips: one per command sent
// alone, one per pipeline (a cluster pipeline reaches its nodes in
// parallel).
type trips struct{ n atomic.Int64 }

func (h *trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// meter measures round trips and server commands of the timed calls only.
type meter struct {
	b        *testing.B
	rdb      redis.UniversalClient
	trips    *trips
	rt, cmds int64
	t0, c0   int64
}

func newMeter(b *testing.B, rdb redis.UniversalClient) *meter {
	h := &trips{}
	rdb.AddHook(h)
	return &meter{b: b, rdb: rdb, trips: h}
}

func (m *meter) start() {
	m.b.StopTimer()
	m.c0 = redisserver.Commands(m.b, m.rdb)
	m.t0 = m.trips.n.Load()
	m.b.StartTimer()
}

func (m *meter) stop() {
	m.b.StopTimer()
	m.rt += m.trips.n.Load() - m.t0
	m.cmds += redisserver.Commands(m.b, m.rdb) - m.c0
	m.b.StartTimer()
}

func (m *meter) report() {
	m.b.ReportMetric(float64(m.rt)/float64(m.b.N), "roundtrips/op")
	m.b.ReportMetric(float64(m.cmds)/float64(m.b.N), "commands/op")
}

// benchSizes are the viewers of one comet, in rooms of 100.
var benchSizes = []int{1000, 15000}

func benchViewers(comet string, n int) []route.Conn {
	return viewers(comet, n, 100, roomsOf(n/100))
}

// BenchmarkRegisterAll re-registers every viewer of a comet into a registry
// that has none of them (Redis came back empty).
func BenchmarkRegisterAll(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			eachB(b, func(b *testing.B, rdb redis.UniversalClient) {
				ctx := context.Background()
				s := route.New(rdb)
				m := newMeter(b, rdb)
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					comet := testkit.Uniq("comet")
					held := benchViewers(comet, n)
					m.start()
					if added, err := s.RegisterAll(ctx, comet, held); err != nil || added != n {
						b.Fatal(added, err)
					}
					m.stop()
					b.StopTimer()
					if _, err := s.RemoveComet(ctx, comet); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				m.report()
			})
		})
	}
}

// BenchmarkReconcile runs Reconcile of one comet when nothing is wrong (the
// periodic case), after 1% of its viewers were lost and 1% phantoms
// appeared, and against a registry that lost everything.
func BenchmarkReconcile(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.Run("clean", func(b *testing.B) { benchReconcile(b, n, 0, false) })
			b.Run("drift1pct", func(b *testing.B) { benchReconcile(b, n, n/100, false) })
			b.Run("lostall", func(b *testing.B) { benchReconcile(b, n, 0, true) })
		})
	}
}

func benchReconcile(b *testing.B, n, drift int, lostAll bool) {
	eachB(b, func(b *testing.B, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		comet := testkit.Uniq("comet")
		held := benchViewers(comet, n)
		m := newMeter(b, rdb)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			want := route.Repair{Added: drift, Removed: drift}
			if lostAll {
				if _, err := s.RemoveComet(ctx, comet); err != nil {
					b.Fatal(err)
				}
				want = route.Repair{Added: n}
			} else if i == 0 {
				if _, err := s.RegisterAll(ctx, comet, held); err != nil {
					b.Fatal(err)
				}
			}
			for j := 0; j < drift; j++ {
				if err := s.Unregister(ctx, held[j*100]); err != nil {
					b.Fatal(err)
				}
				p := held[j*100+1]
				p.ID += "-phantom" + strconv.Itoa(i)
				if err := s.Register(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			m.start()
			rep, err := s.Reconcile(ctx, comet, held)
			if err != nil || rep != want {
				b.Fatal(rep, err)
			}
			m.stop()
		}
		m.report()
		b.StopTimer()
		if _, err := s.RemoveComet(ctx, comet); err != nil {
			b.Fatal(err)
		}
	})
}
