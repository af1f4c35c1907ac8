package route_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

func TestBeginEndBroadcast(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room, comet := testkit.Uniq("room"), testkit.Uniq("comet")
		if err := s.Register(ctx, route.Conn{ID: testkit.Uniq("c"), Room: room, Comet: comet}); err != nil {
			t.Fatal(err)
		}
		ids := []string{testkit.Uniq("m"), testkit.Uniq("m")}
		opts := route.BeginOptions{Window: time.Second, Owner: "a", ClaimTTL: 5 * time.Second, LockTTL: 5 * time.Second}

		b, err := s.BeginBroadcast(ctx, room, msgsOf(ids...), opts)
		if err != nil || b.Status != route.Acquired || b.Lock == nil {
			t.Fatalf("begin = %+v, %v", b, err)
		}
		if len(b.States) != 2 || b.States[0] != route.Claimed || b.States[1] != route.Claimed || b.Comets[comet] != 1 {
			t.Fatalf("begin = %+v", b)
		}
		within(t, "lock PTTL", pttl(t, rdb, "lock:broadcast:{"+room+"}"), 4900*time.Millisecond, 5*time.Second)
		within(t, "cooldown PTTL", pttl(t, rdb, "room:cooldown:{"+room+"}"), 900*time.Millisecond, time.Second)

		// While the lock is held, another owner gets Locked and touches
		// neither the window nor the claims.
		other := testkit.Uniq("m")
		rdb.Del(ctx, "room:cooldown:{"+room+"}")
		b2, err := s.BeginBroadcast(ctx, room, msgsOf(other), route.BeginOptions{Window: time.Second, Owner: "b", ClaimTTL: time.Second, LockTTL: time.Second})
		if err != nil || b2.Status != route.LockedElsewhere || b2.Lock != nil {
			t.Fatalf("begin while locked = %+v, %v", b2, err)
		}
		if rdb.Exists(ctx, "room:cooldown:{"+room+"}", "msg:processed:{"+room+"}:"+other).Val() != 0 {
			t.Fatal("a locked-out begin opened the window or claimed an id")
		}

		if err := s.EndBroadcast(ctx, &route.Lock{Room: room, Token: "forged"}, ids, time.Minute); err != route.ErrNotHolder {
			t.Fatalf("end with a foreign token: %v", err)
		}
		if rdb.Exists(ctx, "lock:broadcast:{"+room+"}").Val() != 1 {
			t.Fatal("a foreign end released the lock")
		}
		if err := s.EndBroadcast(ctx, b.Lock, ids, time.Minute); err != nil {
			t.Fatal(err)
		}
		if rdb.Exists(ctx, "lock:broadcast:{"+room+"}").Val() != 0 {
			t.Fatal("lock not released")
		}
		within(t, "processed PTTL", pttl(t, rdb, "msg:processed:{"+room+"}:"+ids[0]), 59*time.Second, time.Minute)

		// The window is running (opened again; it was cleared above): Wait,
		// nothing else.
		if ob := begin(t, s, room, opts, testkit.Uniq("m")); ob.Status != route.Acquired {
			t.Fatalf("opening the window: %+v", ob)
		} else {
			release(t, s, ob)
		}
		b3, err := s.BeginBroadcast(ctx, room, msgsOf(other), opts)
		if err != nil || b3.Status != route.InWindow || b3.Wait <= 0 || b3.Wait > time.Second || b3.Lock != nil {
			t.Fatalf("begin inside the window = %+v, %v", b3, err)
		}
		// Without a window and only delivered ids: nothing claimable, no lock.
		b4, err := s.BeginBroadcast(ctx, room, msgsOf(ids...), route.BeginOptions{Owner: "a", ClaimTTL: time.Second, LockTTL: time.Second})
		if err != nil || b4.Status != route.NoneClaimable || b4.Lock != nil || b4.States[0] != route.Processed || b4.States[1] != route.Processed {
			t.Fatalf("begin of delivered ids = %+v, %v", b4, err)
		}
		if rdb.Exists(ctx, "lock:broadcast:{"+room+"}").Val() != 0 {
			t.Fatal("lock taken with nothing to deliver")
		}
	})
}

func BenchmarkBeginEndBroadcast(b *testing.B) {
	eachB(b, func(b *testing.B, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		prefix := testkit.Uniq("room")
		ids := []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"}
		msgs := msgsOf(ids...)
		opts := route.BeginOptions{Window: 50 * time.Millisecond, Owner: "bench", ClaimTTL: 5 * time.Second, LockTTL: 5 * time.Second}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			room := prefix + "-" + itoa(i)
			bg, err := s.BeginBroadcast(ctx, room, msgs, opts)
			if err != nil || bg.Status != route.Acquired || bg.Lock == nil {
				b.Fatal(bg, err)
			}
			// As job ends a batch of messages: their claims are final, only
			// the lock is released.
			if err := s.ReleaseLock(ctx, bg.Lock); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "broadcasts/s")
	})
}

func itoa(i int) string { return strconv.Itoa(i) }

// msgsOf returns one message per id, as job hands them to BeginBroadcast.
func msgsOf(ids ...string) []danmaku.Message {
	out := make([]danmaku.Message, len(ids))
	for i, id := range ids {
		out[i] = danmaku.Message{ID: id, UID: int64(i + 1), Name: "n", Content: "c-" + id, TS: 1}
	}
	return out
}

// BenchmarkSeparateGuards is what BeginBroadcast + EndBroadcast replace:
// the seed's guards, one command (or pipeline) each: the window, the
// claims, the lock, the route lookup, the marks and the lock's release,
// six round trips.
func BenchmarkSeparateGuards(b *testing.B) {
	eachB(b, func(b *testing.B, rdb redis.UniversalClient) {
		ctx := context.Background()
		prefix := testkit.Uniq("room")
		ids := []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"}
		setAll := func(room, value string, nx bool, ttl time.Duration) {
			p := rdb.Pipeline()
			for _, id := range ids {
				k := "msg:processed:{" + room + "}:" + id
				if nx {
					p.SetNX(ctx, k, value, ttl)
				} else {
					p.Set(ctx, k, value, ttl)
				}
			}
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			room := prefix + "-" + itoa(i)
			if ok, err := rdb.SetNX(ctx, "room:cooldown:{"+room+"}", "1", 50*time.Millisecond).Result(); !ok || err != nil {
				b.Fatal(ok, err)
			}
			setAll(room, "claim:bench", true, 5*time.Second)
			if ok, err := rdb.SetNX(ctx, "lock:broadcast:{"+room+"}", "token", 5*time.Second).Result(); !ok || err != nil {
				b.Fatal(ok, err)
			}
			if err := rdb.HGetAll(ctx, "room:comets:{"+room+"}").Err(); err != nil {
				b.Fatal(err)
			}
			setAll(room, "done", false, time.Minute)
			if err := rdb.Del(ctx, "lock:broadcast:{"+room+"}").Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "broadcasts/s")
	})
}

// TestBeginBroadcastStoresEncoded: the JSON job hands over (the envelope's
// bytes) is the history element, byte for byte, and reads back as the
// messages.
func TestBeginBroadcastStoresEncoded(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room := testkit.Uniq("room")
		msgs := msgsOf(testkit.Uniq("m"), testkit.Uniq("m"))
		enc := make([][]byte, len(msgs))
		for i, m := range msgs {
			enc[i], _ = json.Marshal(m)
		}
		o := route.BeginOptions{Owner: "job1", LockTTL: time.Second}
		if _, err := s.BeginBroadcast(ctx, room, msgs, route.BeginOptions{Owner: "job1", Encoded: enc[:1]}); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("one encoded message for two: %v", err)
		}
		o.Encoded = enc
		b, err := s.BeginBroadcast(ctx, room, msgs, o)
		if err != nil || b.Status != route.Acquired {
			t.Fatalf("begin = %+v, %v", b, err)
		}
		release(t, s, b)
		stored, err := rdb.LRange(ctx, "room:history:{"+room+"}", 0, -1).Result()
		if err != nil || len(stored) != 2 || stored[0] != string(enc[0]) || stored[1] != string(enc[1]) {
			t.Fatalf("history = %q, %v; want %q", stored, err, enc)
		}
		h, err := s.History(ctx, room, 0, 10)
		if err != nil || len(h.Msgs) != 2 || h.Msgs[1].Content != msgs[1].Content || h.Msgs[1].Pos != 2 {
			t.Fatalf("history read = %+v, %v", h, err)
		}
	})
}
