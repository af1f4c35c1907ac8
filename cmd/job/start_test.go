package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

// The job says when it got its partitions and when it stopped, and its
// listener answers in JSON like the other roles.
func TestLogsAndJSONAnswers(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	m := NewMain()
	m.Logger = zap.New(core)
	m.Config.Redis.Addrs = []string{redisserver.Standalone(t).Addr}
	m.Config.Kafka.Brokers = kafkabroker.Start(t, kafkabroker.MinSessionTimeout(time.Second)).Brokers()
	m.Config.Kafka.Partitions = 2
	m.Config.Job.MetricsAddr = "127.0.0.1:0"
	m.Config.Job.SessionTimeout = time.Second
	m.Config.Job.PushSecret = testSecret
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Ready once the consumer runs, which Run does not wait for.
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		resp, err := http.Get("http://" + m.MetricsAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errString(resp.Status)
		}
		return nil
	})
	for path, want := range map[string]struct {
		status int
		key    string
	}{"/healthz": {200, "status"}, "/readyz": {200, "status"}, "/nope": {404, "error"}} {
		resp, err := http.Get("http://" + m.MetricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body map[string]any
		if resp.StatusCode != want.status || json.Unmarshal(b, &body) != nil || body[want.key] == nil {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		if logs.FilterMessage("kafka partitions assigned").Len() == 0 {
			return errString("no partition assignment logged")
		}
		return nil
	})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessage("job stopped").Len() != 1 {
		t.Fatalf("no stop logged: %v", logs.All())
	}
}

type errString string

func (e errString) Error() string { return string(e) }
