package process

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
)

// recorder is a Consumer that writes down what the role asked of it, and
// what the role's own /metrics answered while it shut down.
type recorder struct {
	metricsURL string

	mu     sync.Mutex
	events []string
}

func (c *recorder) note(e string) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

func (c *recorder) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.events...)
}

func (c *recorder) Start(context.Context) error { c.note("start"); return nil }
func (c *recorder) Ready(context.Context) error { return nil }

func (c *recorder) Shutdown(context.Context) error {
	status := "unreachable"
	if resp, err := http.Get(c.metricsURL); err == nil {
		resp.Body.Close()
		status = resp.Status
	}
	c.note("shutdown, /metrics " + status)
	return nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A consumer role serves its status at once, is not ready while Kafka is
// away (and does not start the consumer), starts it and turns ready once
// the broker answers, and at Close shuts the consumer down while /metrics
// still answers, then closes the clients, then logs that it stopped.
func TestConsumerRoleLifecycle(t *testing.T) {
	b := kafkabroker.Start(t)
	b.Stop()
	core, logs := observer.New(zap.InfoLevel)
	c := &recorder{}
	k := config.DefaultKafka()
	k.Brokers, k.Topic, k.Partitions = b.Brokers(), "rooms", 2
	r := &ConsumerRole{Name: "tester", Consumer: c, Kafka: k, MetricsAddr: "127.0.0.1:0",
		Metrics: prometheus.NewRegistry(), Log: zap.New(core), ShutdownTimeout: 5 * time.Second,
		Closers: []func() error{func() error { c.note("client closed"); return nil }}}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	base := "http://" + r.MetricsAddr
	c.metricsURL = base + "/metrics"

	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while kafka is away: %d", code)
	}
	code, body := get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "consumer has not started") {
		t.Fatalf("/readyz while kafka is away: %d %s", code, body)
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if logs.FilterMessage("kafka topic not ready, retrying").Len() == 0 {
			return fmt.Errorf("no retry logged")
		}
		return nil
	})
	if got := c.seen(); len(got) != 0 {
		t.Fatalf("consumer asked %v while kafka was away", got)
	}

	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	// The start-up retries every second, each attempt bounded by 5 s.
	testkit.SucceedsSoon(t, 30*time.Second, func() error {
		if code, body := get(t, base+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz %d %s", code, body)
		}
		return nil
	})
	if n, err := kafkaPartitions(k); err != nil || n != 2 {
		t.Fatalf("topic rooms: %d partitions, %v; want 2 created", n, err)
	}
	if logs.FilterMessage("tester running").Len() != 1 {
		t.Fatalf("no start logged: %v", logs.All())
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"start", "shutdown, /metrics 200 OK", "client closed"}
	if got := c.seen(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lifecycle %q, want %q", got, want)
	}
	if logs.FilterMessage("tester stopped").Len() != 1 {
		t.Fatalf("no stop logged: %v", logs.All())
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the status listener still serves after Close")
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Close while the start-up still waits for Kafka returns at once and
// never starts the consumer; it still shuts it down (a consumer may hold
// what it opened in its constructor).
func TestConsumerRoleCloseWhileWaiting(t *testing.T) {
	b := kafkabroker.Start(t)
	b.Stop()
	c := &recorder{}
	k := config.DefaultKafka()
	k.Brokers = b.Brokers()
	r := &ConsumerRole{Name: "tester", Consumer: c, Kafka: k, MetricsAddr: "127.0.0.1:0",
		Metrics: prometheus.NewRegistry(), Log: zap.NewNop(), ShutdownTimeout: 5 * time.Second}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.metricsURL = "http://" + r.MetricsAddr + "/metrics"
	began := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// An attempt in flight is bounded by 5 s; Close cancels it.
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("Close took %v while kafka was away", d)
	}
	if got := c.seen(); len(got) != 1 || got[0] != "shutdown, /metrics 200 OK" {
		t.Fatalf("lifecycle %q, want only the shutdown", got)
	}
}

// A role whose Run failed or never ran closes what it holds and nothing
// else.
func TestConsumerRoleCloseWithoutRun(t *testing.T) {
	closed := 0
	r := &ConsumerRole{Closers: []func() error{func() error { closed++; return nil }}}
	if err := r.Close(); err != nil || closed != 1 {
		t.Fatalf("Close: %v, clients closed %d times", err, closed)
	}
}

func kafkaPartitions(k config.Kafka) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return kafkax.Partitions(ctx, k.Brokers, k.Topic)
}
