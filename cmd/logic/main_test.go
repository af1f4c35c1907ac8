package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Run(m)) }

// The binary's wiring: Main starts on :0 against a real Redis and the
// embedded broker, creates the topic, serves a send and its metrics, and
// shuts down cleanly.
func TestMainServes(t *testing.T) {
	broker := kafkabroker.Start(t)
	m := NewMain()
	// The shipped file must load as it is.
	if err := config.Load(&m.Config, config.Options{Name: "logic", Args: []string{
		"-config", "../../configs/logic.yaml",
		"-logic.listen", "127.0.0.1:0",
		"-log.level", "warn",
	}, Environ: []string{
		"DANMAKU_REDIS_ADDRS=" + redisserver.Standalone(t).Addr,
		"DANMAKU_KAFKA_BROKERS=" + broker.Addr(),
		"DANMAKU_KAFKA_PARTITIONS=3",
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Run serves at once; the topic is created in the background and
	// /readyz says so.
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		resp, err := http.Get("http://" + m.Addr() + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	if n, err := kafkax.Partitions(ctx, broker.Brokers(), m.Config.Kafka.Topic); err != nil || n != 3 {
		t.Fatalf("topic partitions = %d, %v; want 3", n, err)
	}

	base := "http://" + m.Addr()
	resp, err := http.Post(base+"/logic/send", "application/json",
		strings.NewReader(`{"roomId":"main_test","userId":424242,"userName":"m","messages":[{"content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), `"msgIds":["`) {
		t.Fatalf("send: %d %s", resp.StatusCode, body)
	}
	for path, want := range map[string]string{
		"/healthz": `"ok"`,
		"/readyz":  `"ready"`,
		"/metrics": "danmaku_logic_messages_accepted_total 1",
		"/admin/":  `<script src="console.js">`, // the moderator console, next to the admin API
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("server still answers after Close")
	}
}

// configs/logic.yaml lists every knob with its default value.
func TestConfigFileListsEveryDefault(t *testing.T) {
	b, err := os.ReadFile("../../configs/logic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	fromFile := NewMain().Config
	if err := config.Load(&fromFile, config.Options{Args: []string{"-config", "../../configs/logic.yaml"}}); err != nil {
		t.Fatal(err)
	}
	want, got := config.Keys(&def), config.Keys(&fromFile)
	for i, k := range want {
		if !hasKey(doc, k[0]) {
			t.Errorf("configs/logic.yaml lacks %s", k[0])
		}
		if got[i] != k {
			t.Errorf("configs/logic.yaml: %s = %q, default is %q", k[0], got[i][2], k[2])
		}
	}
}

// hasKey reports whether the YAML document holds the dotted key
// ("logic.blocked_words.mode").
func hasKey(doc map[string]any, key string) bool {
	name, rest, nested := strings.Cut(key, ".")
	v, ok := doc[name]
	if !ok || !nested {
		return ok
	}
	sub, ok := v.(map[string]any)
	return ok && hasKey(sub, rest)
}

// Close lets a request that is in flight finish: with Redis stalled the
// request waits for logic.redis_timeout, Close is called meanwhile, and
// the client still gets its complete 503 answer.
func TestMainDrainsInFlightOnClose(t *testing.T) {
	srv, err := redisserver.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	broker := kafkabroker.Start(t)
	m := NewMain()
	m.Config.Log.Level = "error"
	m.Config.Logic.Listen = "127.0.0.1:0"
	m.Config.Logic.RedisTimeout = time.Second
	m.Config.Redis.Addrs = []string{srv.Addr}
	m.Config.Kafka.Brokers = broker.Brokers()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	sent := make(chan struct{})
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(sent) }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, "http://"+m.Addr()+"/logic/send",
			strings.NewReader(`{"roomId":"drain","userId":77,"userName":"d","messages":[{"content":"x"}]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-sent
	// Written is not yet accepted: wait until the handler runs.
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if !strings.Contains(get(t, "http://"+m.Addr()+"/metrics"), "danmaku_logic_http_requests_in_flight 1") {
			return errors.New("request never reached the handler")
		}
		return nil
	})
	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("in-flight request cut off: %v", r.err)
	}
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"unavailable"`) {
		t.Fatalf("in-flight request: %d %s", r.status, r.body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v", took)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
