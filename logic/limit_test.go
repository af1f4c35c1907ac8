package logic

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

func withLimit(rate float64, burst int) envOption {
	return func(c *Config, _ *testEnv) {
		c.RateLimit, c.RateBurst, c.MaxMessages = rate, burst, min(c.MaxMessages, burst)
	}
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, withLimit(0.5, 5))
	room, uid, other := testkit.Uniq("r"), newUser(), newUser()
	// Three messages, then two: the burst of five is spent.
	for _, n := range []int{3, 2} {
		req := sendReq(room, uid)
		for i := 0; i < n; i++ {
			req.Messages = append(req.Messages, SendMessage{Content: "m"})
		}
		if r := e.send(t, req); r.status != http.StatusAccepted {
			t.Fatalf("within budget: status %d: %s", r.status, r.body)
		}
	}
	r := e.send(t, sendReq(room, uid, "one too many"))
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("over budget: status %d: %s", r.status, r.body)
	}
	// One token refills in two seconds at 0.5/s.
	if ra := r.header.Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After = %q, want 2", ra)
	}
	if eb := r.errorBody(t); eb.Code != "rate_limited" || eb.Field != "userId" {
		t.Errorf("error = %+v", eb)
	}
	if r := e.send(t, sendReq(room, other, "someone else")); r.status != http.StatusAccepted {
		t.Fatalf("other user: status %d: %s", r.status, r.body)
	}
	if n := e.counter(t, "danmaku_logic_rate_limited_total"); n != 1 {
		t.Errorf("rate limited counter = %v, want 1", n)
	}
}

// Fifty concurrent single-message requests of one user: exactly the burst
// passes, the rest gets 429.
func TestRateLimitConcurrent(t *testing.T) {
	const burst, clients = 10, 50
	e := newEnv(t, withLimit(0.01, burst))
	room, uid := testkit.Uniq("r"), newUser()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		codes = map[int]int{}
	)
	start := make(chan struct{})
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := e.send(t, sendReq(room, uid, "burst"))
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if codes[http.StatusAccepted] != burst || codes[http.StatusTooManyRequests] != clients-burst {
		t.Fatalf("status counts %v, want %d x 202 and %d x 429", codes, burst, clients-burst)
	}
}

// With Kafka stopped a send fails with 503 within the produce timeout;
// once Kafka is back sends succeed again.
func TestKafkaUnavailable(t *testing.T) {
	const timeout = 500 * time.Millisecond
	e := newEnv(t, func(c *Config, _ *testEnv) { c.ProduceTimeout = timeout })
	room, uid := testkit.Uniq("r"), newUser()
	if r := e.send(t, sendReq(room, uid, "before")); r.status != http.StatusAccepted {
		t.Fatalf("before: status %d: %s", r.status, r.body)
	}
	e.broker.Stop()
	start := time.Now()
	r := e.send(t, sendReq(room, uid, "during"))
	took := time.Since(start)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("during: status %d: %s", r.status, r.body)
	}
	if eb := r.errorBody(t); eb.Code != "unavailable" {
		t.Errorf("error = %+v", eb)
	}
	if took > timeout+time.Second {
		t.Errorf("503 after %v, want within about %v", took, timeout)
	}
	if r := e.do(t, http.MethodGet, "/readyz", "", nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("readyz with Kafka down: %d %s", r.status, r.body)
	}

	if err := e.broker.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted broker starts empty: the server creates its topic again.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.EnsureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		if r := e.send(t, sendReq(room, uid, "after")); r.status != http.StatusAccepted {
			return errStatus(r)
		}
		return nil
	})
	if r := e.do(t, http.MethodGet, "/readyz", "", nil); r.status != http.StatusOK {
		t.Errorf("readyz with Kafka back: %d %s", r.status, r.body)
	}
}

// With Redis stalled (SIGSTOP) a send fails with 503 within the Redis
// timeout; it recovers when Redis resumes. A dedicated server, since the
// shared one serves the other tests.
func TestRedisUnavailable(t *testing.T) {
	srv, err := redisserver.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	const timeout = 300 * time.Millisecond
	e := newEnv(t, withRedis(srv.Addr), func(c *Config, _ *testEnv) { c.RedisTimeout = timeout })
	room, uid := testkit.Uniq("r"), newUser()
	if r := e.send(t, sendReq(room, uid, "before")); r.status != http.StatusAccepted {
		t.Fatalf("before: status %d: %s", r.status, r.body)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	for _, path := range []string{"/logic/send", "/logic/online?roomId=" + room} {
		start := time.Now()
		var r response
		if path == "/logic/send" {
			r = e.send(t, sendReq(room, uid, "during"))
		} else {
			r = e.do(t, http.MethodGet, path, "", nil)
		}
		took := time.Since(start)
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("%s during: status %d: %s", path, r.status, r.body)
		}
		if eb := r.errorBody(t); eb.Code != "unavailable" {
			t.Errorf("%s error = %+v", path, eb)
		}
		if took > timeout+time.Second {
			t.Errorf("%s: 503 after %v, want within about %v", path, took, timeout)
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if r := e.send(t, sendReq(room, uid, "after")); r.status != http.StatusAccepted {
			return errStatus(r)
		}
		return nil
	})
}

func TestOnlineAndHealth(t *testing.T) {
	e := newEnv(t)
	room := testkit.Uniq("r")
	store := route.New(e.rdb)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		c := route.Conn{ID: room + "-c" + strconv.Itoa(i), Room: room, Comet: "comet-1"}
		if err := store.Register(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Unregister(context.Background(), c) })
	}
	r := e.do(t, http.MethodGet, "/logic/online?roomId="+room, "", nil)
	if r.status != http.StatusOK || string(r.body) != `{"roomId":"`+room+`","online":3}`+"\n" {
		t.Fatalf("online: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		field        string
	}{
		{http.MethodGet, "/logic/online", 400, "roomId"},
		{http.MethodGet, "/logic/online?roomId=a%20b", 400, "roomId"},
		{http.MethodPost, "/logic/online?roomId=" + room, 405, "method"},
		{http.MethodGet, "/healthz", 200, ""},
		{http.MethodGet, "/logic/nope", 404, "path"},
		{http.MethodGet, "/readyz", 200, ""},
	} {
		r := e.do(t, tc.method, tc.path, "", nil)
		if r.status != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.method, tc.path, r.status, tc.status, r.body)
			continue
		}
		if tc.field != "" {
			if eb := r.errorBody(t); eb.Field != tc.field {
				t.Errorf("%s %s: field %q, want %q", tc.method, tc.path, eb.Field, tc.field)
			}
		}
	}
	if n := e.counter(t, "danmaku_logic_http_requests_total"); n < 6 {
		t.Errorf("requests counted = %v, want at least 6", n)
	}
}
