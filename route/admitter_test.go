package route_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// admitAll sends reqs through the admitters at once (request i through
// admitters[i % len]) and returns the verdicts in the order of reqs.
func admitAll(t *testing.T, admitters []*route.Admitter, reqs []route.Admission) []route.Verdict {
	t.Helper()
	vs := make([]route.Verdict, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			vs[i], errs[i] = admitters[i%len(admitters)].Admit(context.Background(), reqs[i])
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return vs
}

func newAdmitter(t *testing.T, rdb redis.UniversalClient, o route.AdmitOptions) *route.Admitter {
	a := route.New(rdb).NewAdmitter(o)
	t.Cleanup(a.Close)
	return a
}

// Fifty concurrent requests of one user, through one Admitter and through
// two sharing a server (two logic instances): exactly the burst passes,
// each refusal names the user's bucket with a positive wait, and the
// address's bucket gave only what the user's took. On a cluster each
// request runs alone; the counts are the same.
func TestAdmitterBurst(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		const burst, clients = 10, 50
		slow := route.Bucket{Rate: 0.01, Burst: burst}
		for _, instances := range []int{1, 2} {
			var admitters []*route.Admitter
			for range instances {
				admitters = append(admitters, newAdmitter(t, rdb, route.AdmitOptions{Wait: 200 * time.Microsecond}))
			}
			user, ip := testkit.Uniq("u"), "198.18.0."+strconv.Itoa(instances)
			reqs := make([]route.Admission, clients)
			for i := range reqs {
				reqs[i] = route.Admission{User: user, Room: "r1", N: 1, UserBucket: slow,
					IP: ip, IPBucket: route.Bucket{Rate: 0.01, Burst: clients + 10}}
			}
			allowed := 0
			for _, v := range admitAll(t, admitters, reqs) {
				switch {
				case v.Allowed:
					allowed++
				case v.Limit != "user" || v.RetryAfter <= 0:
					t.Fatalf("%d instances: refusal %+v, want the user's bucket with a wait", instances, v)
				}
			}
			if allowed != burst {
				t.Fatalf("%d instances: %d of %d admitted, want the burst %d", instances, allowed, clients, burst)
			}
			// The address's bucket lost only the 10 admitted.
			other := route.Admission{User: testkit.Uniq("u"), Room: "r1", N: clients, UserBucket: route.Bucket{Rate: 0.01, Burst: clients},
				IP: ip, IPBucket: route.Bucket{Rate: 0.01, Burst: clients + 10}}
			if v := admitAll(t, admitters[:1], []route.Admission{other})[0]; !v.Allowed {
				t.Fatalf("%d instances: the address's last %d tokens: %+v", instances, clients, v)
			}
			other.User = testkit.Uniq("u")
			other.N = 1
			if v := admitAll(t, admitters[:1], []route.Admission{other})[0]; v.Allowed || v.Limit != "ip" {
				t.Fatalf("%d instances: the address's bucket empty: %+v", instances, v)
			}
		}
	})
}

// One batch holds requests of many users: a banned and a muted user are
// refused without spending the address's tokens, a request over the
// address's budget takes nothing from its user, and the rest pass. On a
// single server the batch is one script: EVALSHA, TIME, one MGET and one
// SET per bucket that gave tokens (the flags are read from the MGET).
func TestAdmitterBatch(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room := testkit.Uniq("room")
		banned, muted, roomMuted := testkit.Uniq("u"), testkit.Uniq("u"), testkit.Uniq("u")
		if err := s.Ban(ctx, banned, room, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Mute(ctx, muted, "", 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Mute(ctx, roomMuted, room, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		const n = 20
		ip, flagged := "198.18.1."+strconv.Itoa(time.Now().Second()+1), "198.18.2."+strconv.Itoa(time.Now().Second()+1)
		bucket := route.Bucket{Rate: 0.01, Burst: 5}
		ipBucket := route.Bucket{Rate: 0.01, Burst: n}
		users := []string{banned, muted, roomMuted}
		for len(users) < n+4 { // n+1 fresh users: one more than the address allows
			users = append(users, testkit.Uniq("u"))
		}
		reqs := make([]route.Admission, len(users))
		for i, u := range users {
			reqs[i] = route.Admission{User: u, Room: room, N: 1, UserBucket: bucket, IP: ip, IPBucket: ipBucket}
			if i < 3 {
				reqs[i].IP, reqs[i].IPBucket = flagged, route.Bucket{Rate: 0.01, Burst: 3}
			}
		}
		a := newAdmitter(t, rdb, route.AdmitOptions{Wait: time.Second, Max: len(reqs), Timeout: 5 * time.Second})
		warm := route.Admission{User: testkit.Uniq("u"), Room: room, N: 1, UserBucket: bucket}
		admitAll(t, []*route.Admitter{a}, []route.Admission{warm}) // the script loaded
		before := redisserver.CommandCalls(t, rdb)
		vs := admitAll(t, []*route.Admitter{a}, reqs)
		after := redisserver.CommandCalls(t, rdb)
		if v := vs[0]; !v.Banned || v.RetryAfter < 55*time.Second || v.RetryAfter > time.Minute {
			t.Errorf("banned: %+v", v)
		}
		if v := vs[1]; !v.Muted || !v.Everywhere || v.RetryAfter < 115*time.Second || v.RetryAfter > 2*time.Minute {
			t.Errorf("muted everywhere: %+v", v)
		}
		if v := vs[2]; !v.Muted || v.Everywhere || v.RetryAfter < 175*time.Second || v.RetryAfter > 3*time.Minute {
			t.Errorf("muted in the room: %+v", v)
		}
		allowed, refused := 0, -1
		for i, v := range vs[3:] {
			switch {
			case v.Allowed:
				allowed++
			case v.Limit == "ip" && v.RetryAfter > 0 && refused < 0:
				refused = i + 3
			default:
				t.Errorf("fresh user: %+v", v)
			}
		}
		if allowed != n || refused < 0 {
			t.Fatalf("fresh users: %d admitted, want %d and one refused by the address", allowed, n)
		}
		// The refusals took nothing: the flagged requests' address has its
		// 3 tokens, the user the address refused its 5.
		after2 := []route.Admission{
			{User: testkit.Uniq("u"), Room: room, N: 3, UserBucket: bucket, IP: flagged, IPBucket: route.Bucket{Rate: 0.01, Burst: 3}},
			{User: users[refused], Room: room, N: 5, UserBucket: bucket},
		}
		for i, v := range admitAll(t, []*route.Admitter{a}, after2) {
			if !v.Allowed {
				t.Errorf("after the batch, request %d: %+v, want the full bucket", i, v)
			}
		}
		if _, cluster := rdb.(*redis.ClusterClient); cluster {
			return
		}
		// n users' buckets and the address's.
		want := map[string]int64{"evalsha": 1, "time": 1, "mget": 1, "set": n + 1}
		for cmd, w := range want {
			if got := after[cmd] - before[cmd]; got != w {
				t.Errorf("%s: %d calls for the batch, want %d (all: %v)", cmd, got, w, diff(before, after))
			}
		}
		if got := after["pttl"] - before["pttl"]; got != 0 {
			t.Errorf("pttl: %d calls, want none", got)
		}
	})
}

// A flag written without its end (by an older version: the value "1")
// still refuses, with the wait from its TTL.
func TestAdmitOldFlags(t *testing.T) {
	rdb := redisserver.Client(t)
	ctx := context.Background()
	s := route.New(rdb)
	user, room := testkit.Uniq("u"), testkit.Uniq("room")
	bucket := route.Bucket{Rate: 1, Burst: 5}
	if err := rdb.Set(ctx, "room:ban:{"+room+"}:"+user, "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := s.Admit(ctx, route.Admission{User: user, Room: room, N: 1, UserBucket: bucket})
	if err != nil || !v.Banned || v.RetryAfter < 59*time.Second {
		t.Fatalf("old ban: %+v %v", v, err)
	}
}

// A stalled server: each request fails EUNAVAILABLE at its own context's
// end, and the Admitter serves again once the server resumes.
func TestAdmitterStalled(t *testing.T) {
	srv, rdb := redisserver.Private(t)
	a := newAdmitter(t, rdb, route.AdmitOptions{Timeout: 300 * time.Millisecond})
	adm := route.Admission{User: testkit.Uniq("u"), Room: "r1", N: 1, UserBucket: route.Bucket{Rate: 100, Burst: 100}}
	resume := srv.PauseUntilResumed(t)
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := a.Admit(ctx, adm)
			if danmaku.ErrorCode(err) != danmaku.EUNAVAILABLE {
				t.Errorf("stalled: %v, want EUNAVAILABLE", err)
			}
			if took := time.Since(start); took > 400*time.Millisecond {
				t.Errorf("stalled: answered after %v", took)
			}
		}()
	}
	wg.Wait()
	resume()
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := a.Admit(ctx, adm)
		return err
	})
}

func diff(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// A request that waits behind a stalled batch is still answered within
// Timeout of its own call, with no deadline of its own: its batch's round
// trip ends by its deadline, not Timeout after the stalled batch ended.
func TestAdmitterAnswersWithinTimeout(t *testing.T) {
	srv, rdb := redisserver.Private(t)
	const timeout = 300 * time.Millisecond
	a := newAdmitter(t, rdb, route.AdmitOptions{Timeout: timeout, InFlight: 1})
	adm := route.Admission{User: testkit.Uniq("u"), Room: "r1", N: 1, UserBucket: route.Bucket{Rate: 100, Burst: 100}}
	resume := srv.PauseUntilResumed(t)
	defer resume()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * timeout / 2) // the second waits behind the first's batch
			start := time.Now()
			_, err := a.Admit(context.Background(), adm)
			if danmaku.ErrorCode(err) != danmaku.EUNAVAILABLE {
				t.Errorf("request %d: %v, want EUNAVAILABLE", i, err)
			}
			if took := time.Since(start); took > timeout+100*time.Millisecond {
				t.Errorf("request %d answered after %v, Timeout %v", i, took, timeout)
			}
		}()
	}
	wg.Wait()
}
