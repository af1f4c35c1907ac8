package logic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Run(m)) }

const testTopic = "rooms"

// testEnv is one logic Server on a real HTTP listener, backed by its own
// embedded Kafka broker and the shared (or a given) redis-server.
type testEnv struct {
	srv    *Server
	url    string
	broker *kafkabroker.Broker
	rdb    redis.UniversalClient
	reg    *prometheus.Registry
	// verifier is given to the Server (set it with withAuth).
	verifier *auth.Verifier
	// vod is given to the Server as Deps.VOD (set it with withVOD).
	vod VODStore
}

type envOption func(*Config, *testEnv)

func withRedis(addr string) envOption {
	return func(_ *Config, e *testEnv) { e.rdb = newRedis(addr) }
}

func newRedis(addr string) redis.UniversalClient {
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 []string{addr},
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
	})
}

func newEnv(t testing.TB, opts ...envOption) *testEnv {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ProduceTimeout = time.Second
	// Every test sends from 127.0.0.1: the address bucket is checked in
	// each send but never limits, except in tests that set it.
	cfg.IPRateLimit, cfg.IPRateBurst = 1e6, 1e6
	e := &testEnv{reg: prometheus.NewRegistry()}
	for _, o := range opts {
		o(&cfg, e)
	}
	if e.rdb == nil {
		e.rdb = newRedis(redisserver.Standalone(t).Addr)
	}
	t.Cleanup(func() { e.rdb.Close() })
	e.broker = kafkabroker.Start(t)
	kc := config.DefaultKafka()
	kc.Brokers = e.broker.Brokers()
	kc.Topic = testTopic
	kc.Partitions = 4
	srv, err := New(cfg, Deps{Store: route.New(e.rdb), Kafka: kc, Registerer: e.reg, Verifier: e.verifier, VOD: e.vod})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.EnsureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Shutdown(context.Background())
	})
	e.url = hs.URL
	return e
}

// newUser returns a user id no other test uses, so rate-limit buckets in
// the shared Redis never interfere.
func newUser() int64 { return rand.Int64N(1<<52) + 1 }

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errorBody(t *testing.T) httpx.ErrorDetail {
	t.Helper()
	var b httpx.ErrorBody
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	return b.Error
}

func (r response) ids(t *testing.T) []string {
	t.Helper()
	var b SendResponse
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("send body %q: %v", r.body, err)
	}
	return b.MsgIDs
}

func (e *testEnv) do(t *testing.T, method, path, contentType string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// doWith is do with extra request headers.
func (e *testEnv) doWith(t *testing.T, method, path string, header http.Header, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *testEnv) send(t *testing.T, req any) response {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return e.do(t, http.MethodPost, "/logic/send", "application/json", b)
}

func sendReq(room string, uid int64, contents ...string) SendRequest {
	r := SendRequest{RoomID: room, UserID: uid, UserName: "tester"}
	for _, c := range contents {
		r.Messages = append(r.Messages, SendMessage{Content: c})
	}
	return r
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }

// counter returns the sum of all series of the named metric.
func (e *testEnv) counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func errStatus(r response) error { return fmt.Errorf("status %d: %s", r.status, r.body) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
