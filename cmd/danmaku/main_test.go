package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Run(m)) }

// startMain runs the all-in-one binary's Main on a free port with embedded
// Redis and Kafka, and closes it when the test ends.
func startMain(tb testing.TB, mutate ...func(*Config)) *Main {
	tb.Helper()
	m := NewMain()
	m.Config.Log.Level = "warn"
	m.Config.Logic.Listen = "127.0.0.1:0"
	m.Config.Job.SessionTimeout = time.Second
	m.Config.Kafka.Partitions = 2
	for _, f := range mutate {
		f(&m.Config)
	}
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return m
}

func TestConfigFileMatchesDefaults(t *testing.T) {
	c := DefaultConfig()
	if err := config.Load(&c, config.Options{Args: []string{"-config", "../../configs/danmaku.yaml"}}); err != nil {
		t.Fatal(err)
	}
	want, got := config.Keys(ptr(DefaultConfig())), config.Keys(&c)
	if len(want) != len(got) {
		t.Fatalf("configs/danmaku.yaml: %d keys, defaults have %d", len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Errorf("configs/danmaku.yaml: %s = %q, default %q", got[i][0], got[i][2], want[i][2])
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestDefaultsUseEmbeddedServices(t *testing.T) {
	c := DefaultConfig()
	if len(c.Redis.Addrs) != 0 || len(c.Kafka.Brokers) != 0 {
		t.Fatalf("defaults name external services: redis %v, kafka %v", c.Redis.Addrs, c.Kafka.Brokers)
	}
	if c.Logic.Listen != "127.0.0.1:8090" {
		t.Fatalf("public port %q, want 127.0.0.1:8090 (loopback: auth is off, /metrics public)", c.Logic.Listen)
	}
	if c.Job.Window > 250*time.Millisecond {
		t.Fatalf("window %v is too long for a live demo", c.Job.Window)
	}
}

func TestServesPageAndLibrary(t *testing.T) {
	m := startMain(t)
	for path, want := range map[string]string{
		"/":           "danmaku.js",
		"/danmaku.js": "DanmakuClient",
		"/healthz":    "ok",
	} {
		resp, err := http.Get("http://" + m.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{"danmaku_logic_", "danmaku_job_", "danmaku_comet_connections_accepted_total"} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if !strings.HasPrefix(m.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %q", m.URL())
	}
}

// TestSendReachesViewer is the whole path in one process: HTTP send ->
// embedded Kafka -> job guards on embedded Redis -> comet push -> WebSocket.
func TestSendReachesViewer(t *testing.T) {
	m := startMain(t)
	room := "aio_send"
	ws := dial(t, m, room)

	online := getOnline(t, m, room)
	if online != 1 {
		t.Fatalf("online = %d, want 1", online)
	}
	deadline := time.Now().Add(20 * time.Second)
	// The job's consumer group needs a moment for its first assignment;
	// the first message waits in Kafka meanwhile, so one send is enough.
	ids := send(t, m, room, "hello from http", "second one")
	got := map[string]danmaku.Message{}
	for len(got) < len(ids) {
		sf, _, err := ws.Next(time.Until(deadline))
		if err != nil {
			t.Fatalf("read after %d of %d messages: %v", len(got), len(ids), err)
		}
		f := sf.Msgs
		if f == nil {
			continue
		}
		if f.Room != room {
			t.Fatalf("frame for room %q, want %q", f.Room, room)
		}
		for _, msg := range f.Msgs {
			got[msg.ID] = msg
		}
	}
	for i, id := range ids {
		msg, ok := got[id]
		if !ok {
			t.Fatalf("message %s not received; got %v", id, got)
		}
		want := []string{"hello from http", "second one"}[i]
		if msg.Content != want || msg.Name != "Tester" || msg.UID != 4242 || msg.TS == 0 {
			t.Errorf("message %s = %+v, want content %q from Tester with a timestamp", id, msg, want)
		}
	}
}

// TestExternalServices: with redis.addrs and kafka.brokers set, nothing is
// embedded and the same path runs over a real redis-server and a separate
// Kafka-protocol broker.
func TestExternalServices(t *testing.T) {
	srv := redisserver.Standalone(t)
	b := kafkabroker.Start(t)
	m := externalMain(t, srv.Addr, b.Brokers(), "127.0.0.1:0", "aio-external")
	t.Cleanup(func() { m.Close() })
	if m.emb.redis != nil || m.emb.kafka != nil {
		t.Fatal("embedded services started although real ones are configured")
	}
	room := "aio_external_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	ws := dial(t, m, room)
	getOnline(t, m, room)
	id := send(t, m, room, "via real redis")[0]
	end := time.Now().Add(20 * time.Second)
	for {
		f, _, err := ws.Next(time.Until(end))
		if err != nil {
			t.Fatalf("message %s not received: %v", id, err)
		}
		if f.Msgs != nil && len(f.Msgs.Msgs) > 0 && f.Msgs.Msgs[0].ID == id {
			return
		}
	}
}

// externalMain runs Main on listen with the Redis server redis and the
// Kafka brokers given (not embedded ones: a Main started again on the
// same ones finds the rooms' history and the consumers' offsets).
func externalMain(tb testing.TB, redis string, brokers []string, listen, topic string) *Main {
	tb.Helper()
	m := NewMain()
	m.Config.Log.Level = "warn"
	m.Config.Logic.Listen = listen
	m.Config.Job.SessionTimeout = time.Second
	m.Config.Kafka.Partitions = 2
	m.Config.Kafka.Topic = topic
	m.Config.Redis.Addrs = []string{redis}
	m.Config.Kafka.Brokers = brokers
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		tb.Fatal(err)
	}
	return m
}

func dial(t *testing.T, m *Main, room string) *wsviewer.Conn {
	t.Helper()
	ws, resp, err := wsviewer.TryDial("ws://"+m.Addr()+"/ws?room="+room, nil)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("dial: %v: %s", err, body)
		}
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	if f, data, err := ws.Next(5 * time.Second); err != nil || f.Welcome == nil || f.Welcome.Room != room {
		t.Fatalf("welcome = %s, %v", data, err)
	}
	return ws
}

// getOnline polls the online count until it is positive: registration in
// Redis happens just after the welcome frame.
func getOnline(t *testing.T, m *Main, room string) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + m.Addr() + "/logic/online?roomId=" + room)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Online int64 `json:"online"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("online: %d %v", resp.StatusCode, err)
		}
		if body.Online > 0 || time.Now().After(deadline) {
			return body.Online
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// send posts contents to room and returns the accepted message ids.
func send(t *testing.T, m *Main, room string, contents ...string) []string {
	t.Helper()
	ids, err := postAs(m.Addr(), room, 4242, contents...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// postAs posts contents to room as user uid (each user has its own rate
// limit) and returns the accepted message ids. It does not need a test's
// goroutine.
func postAs(addr, room string, uid int64, contents ...string) ([]string, error) {
	return stack.Post("http://"+addr, room, uid, "Tester", contents)
}

// TestAPIRequestsHaveDeadlines: the public server has no global read
// timeout (WebSockets live long), so API requests get their own: a client
// that stalls in the middle of a body is cut off after logic.read_timeout.
func TestAPIRequestsHaveDeadlines(t *testing.T) {
	m := NewMain()
	m.Config.Log.Level = "warn"
	m.Config.Logic.Listen = "127.0.0.1:0"
	m.Config.Logic.ReadTimeout = 200 * time.Millisecond
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	c, err := net.DialTimeout("tcp", m.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /logic/send HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"roomId\":")
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * time.Second))
	io.Copy(io.Discard, c) // returns when the server gives up on the request
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stalled request held for %v, read timeout is %v", d, m.Config.Logic.ReadTimeout)
	}
}

// TestCloseSendsGoingAway: Ctrl-C closes viewers with 1001 so clients
// reconnect, and the port is released.
func TestCloseSendsGoingAway(t *testing.T) {
	m := startMain(t)
	ws := dial(t, m, "aio_close")
	addr := m.Addr()
	done := make(chan error, 1)
	go func() { done <- m.Close() }()
	end := time.Now().Add(15 * time.Second)
	for {
		_, _, err := ws.NextRaw(time.Until(end))
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Fatalf("viewer closed with %v, want 1001 going away", err)
		}
		break
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("port still serving after Close")
	}
}

// logic.admin_addr moves the admin API, the moderator console and
// /metrics off the public port.
func TestAdminAddr(t *testing.T) {
	m := startMain(t, func(c *Config) {
		c.Logic.AdminAddr = "127.0.0.1:0"
		c.Logic.AdminSecret = "admin-secret-of-the-test"
	})
	status := func(method, url string) int {
		req, _ := http.NewRequest(method, url, strings.NewReader(`{"userId":3,"duration":"1m"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer admin-secret-of-the-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	pub, adm := "http://"+m.Addr(), "http://"+m.AdminAddr()
	for _, c := range []struct {
		method, url string
		want        int
	}{
		{"POST", pub + "/logic/admin/mute", 404}, {"GET", pub + "/metrics", 404},
		{"POST", adm + "/logic/admin/mute", 200}, {"GET", adm + "/metrics", 200},
		{"GET", pub + "/admin/", 404}, {"GET", adm + "/admin/", 200}, // the console goes with the admin API
	} {
		if got := status(c.method, c.url); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.url, got, c.want)
		}
	}
}
