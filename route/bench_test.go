package route_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

func eachB(b *testing.B, fn func(b *testing.B, rdb redis.UniversalClient)) {
	b.Run("standalone", func(b *testing.B) { fn(b, redisserver.Client(b)) })
	b.Run("cluster", func(b *testing.B) { fn(b, redisserver.ClusterClient(b)) })
}

func BenchmarkRegisterUnregister(b *testing.B) {
	eachB(b, func(b *testing.B, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		room, comet := testkit.Uniq("room"), testkit.Uniq("comet")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := route.Conn{ID: comet + "-" + strconv.Itoa(i), Room: room, User: "u" + strconv.Itoa(i%100), Comet: comet}
			if err := s.Register(ctx, c); err != nil {
				b.Fatal(err)
			}
			if err := s.Unregister(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	})
}

// BenchmarkRouteLookup10k compares, for one room of 10,000 viewers on 4
// comets, the lookup without an index (SMEMBERS, then one HGETALL per
// connection, each a round trip), the same pipelined, and the room:comets
// index.
func BenchmarkRouteLookup10k(b *testing.B) {
	eachB(b, func(b *testing.B, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		room := testkit.Uniq("room")
		comets := []string{testkit.Uniq("comet"), testkit.Uniq("comet"), testkit.Uniq("comet"), testkit.Uniq("comet")}
		const viewers = 10000
		for i := 0; i < viewers; i++ {
			c := route.Conn{ID: fmt.Sprintf("%s-c%d", room, i), Room: room, Comet: comets[i%4]}
			if err := s.Register(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("seed-N+1", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				conns, err := rdb.SMembers(ctx, "room:connections:{"+room+"}").Result()
				if err != nil {
					b.Fatal(err)
				}
				by := map[string]int{}
				for _, id := range conns {
					m, err := rdb.HGetAll(ctx, "connection:info:{"+id+"}").Result()
					if err != nil {
						b.Fatal(err)
					}
					by[m["comet_id"]]++
				}
				if len(by) != 4 {
					b.Fatal(by)
				}
			}
			b.ReportMetric(viewers+1, "roundtrips/op")
			b.ReportMetric(viewers+1, "commands/op")
		})
		b.Run("seed-pipelined", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if by := seedRoutes(b, rdb, room); len(by) != 4 {
					b.Fatal(by)
				}
			}
			b.ReportMetric(2, "roundtrips/op")
			b.ReportMetric(viewers+1, "commands/op")
		})
		b.Run("room-comets", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if by := roomComets(b, rdb, room); len(by) != 4 || by[comets[0]] != viewers/4 {
					b.Fatal(by)
				}
			}
			b.ReportMetric(1, "roundtrips/op")
			b.ReportMetric(1, "commands/op")
		})
	})
}
