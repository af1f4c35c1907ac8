package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Run(m)) }

// testSecret is a push secret the binary accepts.
const testSecret = "job-test-push-secret"

// The shipped placeholder secret, and a short one, stop the binary at start
// with the setting named.
func TestPlaceholderSecretRefused(t *testing.T) {
	for _, secret := range []string{"change-me-push-secret", "change-me-too-and-long-enough", "short-secret"} {
		m := NewMain()
		m.Config.Redis.Addrs = []string{"127.0.0.1:1"}
		m.Config.Job.PushSecret = secret
		err := m.Run(context.Background())
		m.Close()
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Field != "job.push_secret" {
			t.Fatalf("push secret %q: Run = %v, want an error naming job.push_secret", secret, err)
		}
	}
}

func TestConfigFileLoads(t *testing.T) {
	c := DefaultConfig()
	if err := config.Load(&c, config.Options{Args: []string{"-config", "../../configs/job.yaml", "-job.push_secret", testSecret}}); err != nil {
		t.Fatal(err)
	}
	if c.Job.Window != time.Second || c.Kafka.Topic != "danmaku-room" {
		t.Fatalf("configs/job.yaml does not match the defaults: %+v", c.Job)
	}
}

// job's /metrics, /healthz and /readyz are on loopback unless configured
// otherwise, in the defaults and in the shipped file.
func TestMetricsOnLoopbackByDefault(t *testing.T) {
	c := DefaultConfig()
	if c.Job.MetricsAddr != "127.0.0.1:8082" {
		t.Fatalf("default job.metrics_addr %q, want 127.0.0.1:8082", c.Job.MetricsAddr)
	}
	if err := config.Load(&c, config.Options{Args: []string{"-config", "../../configs/job.yaml", "-job.push_secret", testSecret}}); err != nil {
		t.Fatal(err)
	}
	if c.Job.MetricsAddr != "127.0.0.1:8082" {
		t.Fatalf("configs/job.yaml: job.metrics_addr %q, want 127.0.0.1:8082", c.Job.MetricsAddr)
	}
}

func TestMainRunsAndStops(t *testing.T) {
	srv := redisserver.Standalone(t)
	b := kafkabroker.Start(t, kafkabroker.MinSessionTimeout(time.Second))
	m := NewMain()
	m.Config.Log.Level = "warn"
	m.Config.Redis.Addrs = []string{srv.Addr}
	m.Config.Kafka.Brokers = b.Brokers()
	m.Config.Kafka.Partitions = 2
	m.Config.Job.MetricsAddr = "127.0.0.1:0"
	m.Config.Job.SessionTimeout = time.Second
	m.Config.Job.PushSecret = testSecret
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + m.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "danmaku_job_consumed_total") {
		t.Fatal("metrics endpoint lacks the job's series")
	}
	done := make(chan error, 1)
	go func() { done <- m.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	if m.Close() != nil {
		t.Fatal("second Close reported an error")
	}
}
