package route_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/redistest"
	"github.com/danmaku/danmaku/internal/testutil"
	"github.com/danmaku/danmaku/route"
)

func TestMain(m *testing.M) { os.Exit(redistest.Run(m)) }

func pttl(t *testing.T, rdb redis.UniversalClient, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return d
}

func within(t *testing.T, what string, got, lo, hi time.Duration) {
	t.Helper()
	if got < lo || got > hi {
		t.Fatalf("%s = %v, want in [%v, %v]", what, got, lo, hi)
	}
}

// contend runs fn in n goroutines released at once and returns how many
// returned true.
func contend(t *testing.T, n int, fn func(i int) (bool, error)) int {
	t.Helper()
	var wg sync.WaitGroup
	var wins atomic.Int64
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := fn(i)
			if err != nil {
				errs <- err
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(wins.Load())
}

func TestGuardTTLs(t *testing.T) {
	redistest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		room, msg := testutil.Uniq("room"), testutil.Uniq("m")

		st, err := s.Claim(ctx, room, []string{msg}, "job1", 10*time.Second)
		if err != nil || st[0] != route.Claimed {
			t.Fatalf("claim = %v, %v", st, err)
		}
		within(t, "claim PTTL", pttl(t, rdb, "msg:processed:{"+room+"}:"+msg), 9*time.Second, 10*time.Second)
		if err := s.MarkProcessed(ctx, room, []string{msg}, route.DefaultProcessedTTL); err != nil {
			t.Fatal(err)
		}
		within(t, "processed PTTL", pttl(t, rdb, "msg:processed:{"+room+"}:"+msg), 59*time.Second, 60*time.Second)
		if v := rdb.Get(ctx, "msg:processed:{"+room+"}:"+msg).Val(); v != "done" {
			t.Fatalf("processed value = %q", v)
		}

		ok, rem, err := s.Cooldown(ctx, room, route.DefaultCooldown)
		if err != nil || !ok || rem != time.Second {
			t.Fatalf("cooldown = %v %v %v", ok, rem, err)
		}
		within(t, "cooldown PTTL", pttl(t, rdb, "room:cooldown:{"+room+"}"), 900*time.Millisecond, time.Second)
		ok, rem, err = s.Cooldown(ctx, room, route.DefaultCooldown)
		if err != nil || ok {
			t.Fatalf("second cooldown = %v %v", ok, err)
		}
		within(t, "remaining window", rem, 800*time.Millisecond, time.Second)

		l, err := s.AcquireLock(ctx, room, route.DefaultLockTTL)
		if err != nil {
			t.Fatal(err)
		}
		within(t, "lock PTTL", pttl(t, rdb, "lock:broadcast:{"+room+"}"), 4900*time.Millisecond, 5*time.Second)
		if err := s.ReleaseLock(ctx, l); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCooldownMillisecondWindow(t *testing.T) {
	redistest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		room := testutil.Uniq("room")
		if ok, _, err := s.Cooldown(ctx, room, 50*time.Millisecond); !ok || err != nil {
			t.Fatalf("first: %v %v", ok, err)
		}
		testutil.SucceedsSoon(t, 2*time.Second, func() error {
			ok, rem, err := s.Cooldown(ctx, room, 50*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if rem > 50*time.Millisecond {
				t.Fatalf("remaining %v exceeds the 50ms window", rem)
			}
			if !ok {
				return fmt.Errorf("a 50ms window has not ended yet (%v left)", rem)
			}
			return nil
		})
	})
}

func TestNXUnderContention(t *testing.T) {
	redistest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		room, msg := testutil.Uniq("room"), testutil.Uniq("m")
		t.Run("claim", func(t *testing.T) {
			wins := contend(t, 50, func(i int) (bool, error) {
				st, err := s.Claim(ctx, room, []string{msg}, "owner"+strconv.Itoa(i), 5*time.Second)
				return err == nil && st[0] == route.Claimed, err
			})
			if wins != 1 {
				t.Fatalf("%d claimers won, want 1", wins)
			}
		})
		t.Run("cooldown", func(t *testing.T) {
			wins := contend(t, 50, func(int) (bool, error) {
				ok, _, err := s.Cooldown(ctx, room, time.Second)
				return ok, err
			})
			if wins != 1 {
				t.Fatalf("%d openers of the window, want 1", wins)
			}
		})
		t.Run("lock", func(t *testing.T) {
			wins := contend(t, 50, func(int) (bool, error) {
				_, err := s.AcquireLock(ctx, room, 5*time.Second)
				if err == route.ErrLocked {
					return false, nil
				}
				return err == nil, err
			})
			if wins != 1 {
				t.Fatalf("%d lock holders, want 1", wins)
			}
		})
	})
}

func TestClaimCommitSemantics(t *testing.T) {
	redistest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		room := testutil.Uniq("room")
		ids := []string{testutil.Uniq("m"), testutil.Uniq("m"), testutil.Uniq("m")}

		st, err := s.Claim(ctx, room, ids, "a", 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range st {
			if c != route.Claimed {
				t.Fatalf("id %d: %v", i, c)
			}
		}
		// Same owner again (its own retry): still claimed. Another owner: busy.
		if st, _ := s.Claim(ctx, room, ids[:1], "a", 200*time.Millisecond); st[0] != route.Claimed {
			t.Fatalf("re-claim by owner = %v", st[0])
		}
		if st, _ := s.Claim(ctx, room, ids, "b", time.Second); st[0] != route.Busy {
			t.Fatalf("claim by other owner = %v, want busy", st)
		}
		// Owner a delivers ids[0], gives ids[1] back, and "crashes" holding ids[2].
		if err := s.MarkProcessed(ctx, room, ids[:1], time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseClaims(ctx, room, ids[1:2], "a"); err != nil {
			t.Fatal(err)
		}
		// b must not be able to release a's claim.
		if err := s.ReleaseClaims(ctx, room, ids[2:], "b"); err != nil {
			t.Fatal(err)
		}
		st, _ = s.Claim(ctx, room, ids, "b", time.Second)
		want := []route.ClaimState{route.Processed, route.Claimed, route.Busy}
		for i := range want {
			if st[i] != want[i] {
				t.Fatalf("after partial delivery: %v, want %v", st, want)
			}
		}
		// The crashed owner's claim expires: the message is not lost.
		time.Sleep(250 * time.Millisecond)
		st, _ = s.Claim(ctx, room, ids[2:], "b", time.Second)
		if st[0] != route.Claimed {
			t.Fatalf("expired claim not taken over: %v", st[0])
		}
	})
}

func TestLockOwnership(t *testing.T) {
	redistest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		room := testutil.Uniq("room")
		key := "lock:broadcast:{" + room + "}"

		a, err := s.AcquireLock(ctx, room, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireLock(ctx, room, time.Second); err != route.ErrLocked {
			t.Fatalf("second acquire: %v, want ErrLocked", err)
		}
		forged := &route.Lock{Room: room, Token: "not-" + a.Token}
		if err := s.ReleaseLock(ctx, forged); err != route.ErrNotHolder {
			t.Fatalf("release by other: %v", err)
		}
		if err := s.RenewLock(ctx, forged, 10*time.Second); err != route.ErrNotHolder {
			t.Fatalf("renew by other: %v", err)
		}
		within(t, "PTTL after foreign renew", pttl(t, rdb, key), 0, 300*time.Millisecond)
		if err := s.RenewLock(ctx, a, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		within(t, "PTTL after own renew", pttl(t, rdb, key), 1900*time.Millisecond, 2*time.Second)
		if err := s.RenewLock(ctx, a, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		// Expired: the next contender takes it, and the old holder can
		// neither renew nor release the new holder's lock.
		time.Sleep(150 * time.Millisecond)
		b, err := s.AcquireLock(ctx, room, 5*time.Second)
		if err != nil {
			t.Fatalf("acquire after expiry: %v", err)
		}
		if a.Token == b.Token {
			t.Fatal("tokens repeat across acquisitions")
		}
		if err := s.ReleaseLock(ctx, a); err != route.ErrNotHolder {
			t.Fatalf("stale release: %v", err)
		}
		if err := s.RenewLock(ctx, a, time.Second); err != route.ErrNotHolder {
			t.Fatalf("stale renew: %v", err)
		}
		if v := rdb.Get(ctx, key).Val(); v != b.Token {
			t.Fatalf("lock value %q, want new holder's token", v)
		}
		if err := s.ReleaseLock(ctx, b); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, key).Val(); n != 0 {
			t.Fatal("lock still present after release")
		}
	})
}

func TestRateLimit(t *testing.T) {
	redistest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := route.New(rdb)
		user, other := testutil.Uniq("u"), testutil.Uniq("u")
		for i := 0; i < 5; i++ {
			if ok, _, err := s.Allow(ctx, user, 1, 1, 5); !ok || err != nil {
				t.Fatalf("request %d: %v %v", i, ok, err)
			}
		}
		ok, retry, err := s.Allow(ctx, user, 1, 1, 5)
		if err != nil || ok {
			t.Fatalf("6th request allowed: %v %v", ok, err)
		}
		within(t, "retry after", retry, 1, time.Second)
		if ok, _, _ := s.Allow(ctx, other, 1, 1, 5); !ok {
			t.Fatal("another user was limited")
		}
		// 50 concurrent requests against a budget of 20: exactly 20 pass
		// (refill at 0.001/s adds nothing during the test).
		hot := testutil.Uniq("u")
		wins := contend(t, 50, func(int) (bool, error) {
			ok, _, err := s.Allow(ctx, hot, 1, 0.001, 20)
			return ok, err
		})
		if wins != 20 {
			t.Fatalf("%d passed, budget 20", wins)
		}
		if _, _, err := s.Allow(ctx, user, 6, 1, 5); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("n over burst: %v", err)
		}
	})
}

// TestInvalidIDsNeverReachRedis uses a client of a closed port: any command
// would fail as unavailable, so an EINVALID answer proves the id was
// rejected before Redis was touched.
func TestInvalidIDsNeverReachRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	s := route.New(rdb)
	ctx := context.Background()
	bad := map[string]string{
		"colon": "a:b", "star": "*", "braces": "{x}", "empty": "",
		"65 chars": strings.Repeat("a", 65), "non-ASCII": "viděo", "space": "a b",
	}
	good := "ok"
	for name, id := range bad {
		t.Run(name, func(t *testing.T) {
			calls := map[string]error{
				"register room":   s.Register(ctx, route.Conn{ID: good, Room: id, Comet: good}),
				"register conn":   s.Register(ctx, route.Conn{ID: id, Room: good, Comet: good}),
				"register user":   s.Register(ctx, route.Conn{ID: good, Room: good, Comet: good, User: id}),
				"register comet":  s.Register(ctx, route.Conn{ID: good, Room: good, Comet: id}),
				"unregister room": s.Unregister(ctx, route.Conn{ID: good, Room: id, Comet: good}),
				"mark processed":  s.MarkProcessed(ctx, good, []string{id}, time.Second),
				"release claims":  s.ReleaseClaims(ctx, id, []string{good}, good),
				"release lease":   s.ReleaseLease(ctx, id),
				"renew lease":     s.RenewLease(ctx, route.CometInfo{ID: id, Addr: "x:1"}, time.Second),
			}
			_, calls["online"] = s.Online(ctx, id)
			_, calls["room comets"] = s.RoomComets(ctx, id)
			_, calls["seed routes"] = s.SeedRoutes(ctx, id)
			_, calls["claim room"] = s.Claim(ctx, id, []string{good}, good, time.Second)
			_, calls["claim msg"] = s.Claim(ctx, good, []string{id}, good, time.Second)
			_, _, calls["cooldown"] = s.Cooldown(ctx, id, time.Second)
			_, calls["lock"] = s.AcquireLock(ctx, id, time.Second)
			_, _, calls["allow"] = s.Allow(ctx, id, 1, 1, 1)
			_, calls["remove comet"] = s.RemoveComet(ctx, id)
			if id == "" {
				delete(calls, "register user") // an empty user id means an anonymous viewer
			}
			for call, err := range calls {
				if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) == "" {
					t.Errorf("%s(%q) = %v, want EINVALID naming the field", call, id, err)
				}
			}
		})
	}
	// The same client does report Redis being unreachable for a valid id.
	if _, err := s.Online(ctx, good); danmaku.ErrorCode(err) != danmaku.EUNAVAILABLE {
		t.Fatalf("valid id on dead Redis: %v, want EUNAVAILABLE", err)
	}
}
