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
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Run(m)) }

// eachStore runs fn as a subtest on a single server and on a cluster
// (redisserver.Each), with a Store over the client; rdb is there for what
// a test reads beside the Store (TTLs, keys).
func eachStore(t *testing.T, fn func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient)) {
	t.Helper()
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		fn(t, context.Background(), route.New(rdb), rdb)
	})
}

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

// begin runs BeginBroadcast of ids in room for owner and fails the test on
// an error.
func begin(t testing.TB, s *route.Store, room string, o route.BeginOptions, ids ...string) route.Begin {
	t.Helper()
	b, err := s.BeginBroadcast(context.Background(), room, msgsOf(ids...), o)
	if err != nil {
		t.Fatalf("begin broadcast: %v", err)
	}
	return b
}

// release gives back the lock of an Acquired begin.
func release(t testing.TB, s *route.Store, b route.Begin) {
	t.Helper()
	if b.Status != route.Acquired {
		return
	}
	if err := s.ReleaseLock(context.Background(), b.Lock); err != nil {
		t.Fatalf("release lock: %v", err)
	}
}

// TestGuardTTLs checks the TTL of every guard key as the shipped scripts
// write them with job's default durations: a message's claim (its
// position) 60 s, the cooldown window 1 s, the lock 5 s, an event's claim
// its claim TTL and its done mark the processed TTL.
func TestGuardTTLs(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room, msg := testkit.Uniq("room"), testkit.Uniq("m")
		o := route.BeginOptions{Window: time.Second, Owner: "job1", ClaimTTL: time.Minute, LockTTL: 5 * time.Second}

		b := begin(t, s, room, o, msg)
		if b.Status != route.Acquired || b.States[0] != route.Claimed || b.Pos[0] != 1 {
			t.Fatalf("begin = %+v", b)
		}
		key := "msg:processed:{" + room + "}:" + msg
		within(t, "claim PTTL", pttl(t, rdb, key), 59*time.Second, time.Minute)
		if v := rdb.Get(ctx, key).Val(); v != "pos:"+b.Epoch+":1" {
			t.Fatalf("claim value = %q", v)
		}
		within(t, "cooldown PTTL", pttl(t, rdb, "room:cooldown:{"+room+"}"), 900*time.Millisecond, time.Second)
		within(t, "lock PTTL", pttl(t, rdb, "lock:broadcast:{"+room+"}"), 4900*time.Millisecond, 5*time.Second)
		release(t, s, b)

		b = begin(t, s, room, o, testkit.Uniq("m"))
		if b.Status != route.InWindow || b.Lock != nil {
			t.Fatalf("second begin = %+v", b)
		}
		within(t, "remaining window", b.Wait, 800*time.Millisecond, time.Second)

		ev := danmaku.Event{Op: danmaku.OpBan, Room: room, ID: testkit.Uniq("ev"), User: "u1", Until: 1}
		eb, err := s.BeginEvent(ctx, ev, route.EventOptions{Owner: "job1", ClaimTTL: 10 * time.Second, LockTTL: 5 * time.Second})
		if err != nil || eb.Status != route.Acquired {
			t.Fatalf("begin event = %+v, %v", eb, err)
		}
		evKey := "msg:processed:{" + room + "}:" + ev.ID
		within(t, "event claim PTTL", pttl(t, rdb, evKey), 9*time.Second, 10*time.Second)
		if err := s.EndBroadcast(ctx, eb.Lock, []string{ev.ID}, time.Minute); err != nil {
			t.Fatal(err)
		}
		within(t, "processed PTTL", pttl(t, rdb, evKey), 59*time.Second, time.Minute)
		if v := rdb.Get(ctx, evKey).Val(); v != "done" {
			t.Fatalf("processed value = %q", v)
		}
	})
}

func TestCooldownMillisecondWindow(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		s := route.New(rdb)
		room := testkit.Uniq("room")
		o := route.BeginOptions{Window: 50 * time.Millisecond, Owner: "job1", LockTTL: 5 * time.Second}
		if b := begin(t, s, room, o, testkit.Uniq("m")); b.Status != route.Acquired {
			t.Fatalf("first: %+v", b)
		} else {
			release(t, s, b)
		}
		testkit.SucceedsSoon(t, 2*time.Second, func() error {
			b := begin(t, s, room, o, testkit.Uniq("m"))
			release(t, s, b)
			switch {
			case b.Status == route.Acquired:
				return nil
			case b.Status != route.InWindow:
				t.Fatalf("begin = %+v", b)
			case b.Wait > 50*time.Millisecond:
				t.Fatalf("remaining %v exceeds the 50ms window", b.Wait)
			}
			return fmt.Errorf("a 50ms window has not ended yet (%v left)", b.Wait)
		})
	})
}

// TestNXUnderContention runs the shipped begin script from 50 callers at
// once: one takes the lock, one opens the window, one claims a message
// (the others find it at the winner's position).
func TestNXUnderContention(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		s := route.New(rdb)
		t.Run("claim", func(t *testing.T) {
			room, msg := testkit.Uniq("room"), testkit.Uniq("m")
			var positions sync.Map
			wins := contend(t, 50, func(i int) (bool, error) {
				o := route.BeginOptions{Owner: "owner" + strconv.Itoa(i), LockTTL: 5 * time.Second}
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
					b := begin(t, s, room, o, msg)
					if b.Status == route.LockedElsewhere {
						continue
					}
					release(t, s, b)
					if b.Status != route.Acquired {
						return false, fmt.Errorf("begin = %+v", b)
					}
					positions.Store(b.Pos[0], true)
					return b.States[0] == route.Claimed, nil
				}
				return false, fmt.Errorf("owner%d never got past the lock", i)
			})
			if wins != 1 {
				t.Fatalf("%d claimers won, want 1", wins)
			}
			n := 0
			positions.Range(func(any, any) bool { n++; return true })
			if n != 1 {
				t.Fatalf("the message got %d positions, want 1", n)
			}
		})
		t.Run("cooldown", func(t *testing.T) {
			room := testkit.Uniq("room")
			wins := contend(t, 50, func(i int) (bool, error) {
				o := route.BeginOptions{Window: time.Minute, Owner: "owner" + strconv.Itoa(i), LockTTL: 5 * time.Second}
				msg := testkit.Uniq("m")
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
					switch b := begin(t, s, room, o, msg); b.Status {
					case route.LockedElsewhere:
						continue
					case route.Acquired:
						release(t, s, b)
						return true, nil
					case route.InWindow:
						return false, nil
					default:
						return false, fmt.Errorf("begin = %+v", b)
					}
				}
				return false, fmt.Errorf("owner%d never got past the lock", i)
			})
			if wins != 1 {
				t.Fatalf("%d openers of the window, want 1", wins)
			}
		})
		t.Run("lock", func(t *testing.T) {
			room := testkit.Uniq("room")
			wins := contend(t, 50, func(i int) (bool, error) {
				o := route.BeginOptions{Owner: "owner" + strconv.Itoa(i), LockTTL: 5 * time.Second}
				b := begin(t, s, room, o, testkit.Uniq("m"))
				return b.Status == route.Acquired, nil
			})
			if wins != 1 {
				t.Fatalf("%d lock holders, want 1", wins)
			}
		})
	})
}

// TestEventClaimSemantics follows an event's claim through the shipped
// scripts: the owner's claim holds against another owner until it is
// marked done (then nobody delivers it again), given back with the lock
// (AbortBroadcast), or left to expire by a crashed owner.
func TestEventClaimSemantics(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		room := testkit.Uniq("room")
		ev := func() danmaku.Event {
			return danmaku.Event{Op: danmaku.OpBan, Room: room, ID: testkit.Uniq("ev"), User: "u1", Until: 1}
		}
		opts := func(owner string, claim time.Duration) route.EventOptions {
			return route.EventOptions{Owner: owner, ClaimTTL: claim, LockTTL: 5 * time.Second}
		}
		beginEv := func(e danmaku.Event, o route.EventOptions) route.Begin {
			t.Helper()
			b, err := s.BeginEvent(ctx, e, o)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		done, given, crashed := ev(), ev(), ev()

		// a delivers done; b then finds it processed.
		b := beginEv(done, opts("a", time.Second))
		if b.Status != route.Acquired {
			t.Fatalf("begin = %+v", b)
		}
		if b2 := beginEv(done, opts("b", time.Second)); b2.Status != route.LockedElsewhere {
			t.Fatalf("begin while locked = %+v", b2)
		}
		if err := s.EndBroadcast(ctx, b.Lock, []string{done.ID}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if b2 := beginEv(done, opts("b", time.Second)); b2.Status != route.NoneClaimable || b2.States[0] != route.Processed {
			t.Fatalf("begin of a done event = %+v", b2)
		}

		// a's attempt failed on its side: AbortBroadcast gives back the lock
		// and a's claim, so b claims the event.
		b = beginEv(given, opts("a", time.Minute))
		if released, n, err := s.AbortBroadcast(ctx, room, "b", []string{b.Lock.Token}, []string{given.ID}); err != nil || !released || n != 0 {
			t.Fatalf("abort with b's name = %v %d %v, want the lock released and a's claim kept", released, n, err)
		}
		if b2 := beginEv(given, opts("b", time.Second)); b2.Status != route.NoneClaimable || b2.States[0] != route.Busy {
			t.Fatalf("begin of a's claimed event = %+v", b2)
		}
		b = beginEv(given, opts("a", time.Minute)) // a's own retry takes its claim again
		if b.Status != route.Acquired {
			t.Fatalf("a's retry = %+v", b)
		}
		if released, n, err := s.AbortBroadcast(ctx, room, "a", []string{"other", b.Lock.Token}, []string{given.ID}); err != nil || !released || n != 1 {
			t.Fatalf("abort = %v %d %v", released, n, err)
		}
		if b2 := beginEv(given, opts("b", time.Second)); b2.Status != route.Acquired {
			t.Fatalf("begin after the abort = %+v", b2)
		} else {
			release(t, s, b2)
		}

		// a crashes holding a claim of 200 ms: once it expires, b takes over.
		b = beginEv(crashed, opts("a", 200*time.Millisecond))
		release(t, s, b)
		if b2 := beginEv(crashed, opts("b", time.Second)); b2.Status != route.NoneClaimable || b2.States[0] != route.Busy {
			t.Fatalf("begin of a live claim = %+v", b2)
		}
		time.Sleep(250 * time.Millisecond)
		if b2 := beginEv(crashed, opts("b", time.Second)); b2.Status != route.Acquired {
			t.Fatalf("expired claim not taken over: %+v", b2)
		} else {
			release(t, s, b2)
		}
	})
}

func TestLockOwnership(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room := testkit.Uniq("room")
		key := "lock:broadcast:{" + room + "}"
		o := func(ttl time.Duration) route.BeginOptions {
			return route.BeginOptions{Owner: "job1", LockTTL: ttl}
		}

		ab := begin(t, s, room, o(300*time.Millisecond), testkit.Uniq("m"))
		if ab.Status != route.Acquired {
			t.Fatalf("begin = %+v", ab)
		}
		a := ab.Lock
		if b := begin(t, s, room, o(time.Second), testkit.Uniq("m")); b.Status != route.LockedElsewhere {
			t.Fatalf("second begin: %+v, want locked elsewhere", b)
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
		bb := begin(t, s, room, o(5*time.Second), testkit.Uniq("m"))
		if bb.Status != route.Acquired {
			t.Fatalf("begin after expiry: %+v", bb)
		}
		b := bb.Lock
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

// TestRateLimit checks the user's bucket through Admit, the shipped send
// check (admit.lua on a server, ratelimit.lua on a cluster).
func TestRateLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		room := testkit.Uniq("room")
		admit := func(user string, n int, rate float64, burst int) (route.Verdict, error) {
			return s.Admit(ctx, route.Admission{User: user, Room: room, N: n, UserBucket: route.Bucket{Rate: rate, Burst: burst}})
		}
		user, other := testkit.Uniq("u"), testkit.Uniq("u")
		for i := 0; i < 5; i++ {
			if v, err := admit(user, 1, 1, 5); !v.Allowed || err != nil {
				t.Fatalf("request %d: %+v %v", i, v, err)
			}
		}
		v, err := admit(user, 1, 1, 5)
		if err != nil || v.Allowed || v.Limit != "user" {
			t.Fatalf("6th request allowed: %+v %v", v, err)
		}
		within(t, "retry after", v.RetryAfter, 1, time.Second)
		if v, _ := admit(other, 1, 1, 5); !v.Allowed {
			t.Fatal("another user was limited")
		}
		// 50 concurrent requests against a budget of 20: exactly 20 pass
		// (refill at 0.001/s adds nothing during the test).
		hot := testkit.Uniq("u")
		wins := contend(t, 50, func(int) (bool, error) {
			v, err := admit(hot, 1, 0.001, 20)
			return v.Allowed, err
		})
		if wins != 20 {
			t.Fatalf("%d passed, budget 20", wins)
		}
		if _, err := admit(user, 6, 1, 5); danmaku.ErrorCode(err) != danmaku.EINVALID {
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
				"end broadcast":   s.EndBroadcast(ctx, &route.Lock{Room: good, Token: good}, []string{id}, time.Second),
				"release lease":   s.ReleaseLease(ctx, id),
			}
			o := route.BeginOptions{Owner: good, LockTTL: time.Second}
			_, calls["online"] = s.Online(ctx, id)
			_, calls["begin room"] = s.BeginBroadcast(ctx, id, msgsOf(good), o)
			_, calls["begin msg"] = s.BeginBroadcast(ctx, good, msgsOf(id), o)
			_, _, calls["abort room"] = s.AbortBroadcast(ctx, id, good, []string{good}, nil)
			_, calls["heartbeat"] = s.Heartbeat(ctx, route.CometInfo{ID: id, Addr: "x:1"}, time.Second)
			_, calls["admit"] = s.Admit(ctx, route.Admission{User: id, Room: good, N: 1, UserBucket: route.Bucket{Rate: 1, Burst: 1}})
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
