package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
	"github.com/danmaku/danmaku/route"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Run(m)) }

// The binary's wiring: Main starts on :0 from the shipped configuration
// against a real Redis, a viewer joins, a push reaches it, the listeners
// answer /healthz and /metrics, and Close removes the comet's lease.
func TestMainServes(t *testing.T) {
	m := NewMain()
	if err := config.Load(&m.Config, config.Options{Name: "comet", Args: []string{
		"-config", "../../configs/comet.yaml",
		"-comet.listen", "127.0.0.1:0",
		"-comet.internal_listen", "127.0.0.1:0",
		"-comet.id", "main-test-comet",
		"-log.level", "warn",
	}, Environ: []string{
		"DANMAKU_REDIS_ADDRS=" + redisserver.Standalone(t).Addr,
		"DANMAKU_COMET_SECRET=main-test-secret",
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := m.Server

	ws, _, err := wsviewer.TryDial("ws://"+s.PublicAddr()+"/ws?room=main_test_room", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, data, err := ws.NextRaw(5 * time.Second); err != nil || !strings.Contains(string(data), `"op":"welcome"`) {
		t.Fatalf("welcome: %s %v", data, err)
	}
	p := push.NewClient("main-test-secret", 2*time.Second)
	defer p.Close()
	body, _ := json.Marshal(danmaku.NewBatch("main_test_room", []danmaku.Message{{ID: "m1", UID: 1, Name: "a", Content: "hi", TS: 1}}))
	if n, err := p.Push(ctx, s.AdvertiseAddr(), body); err != nil || n != 1 {
		t.Fatalf("push: %d %v", n, err)
	}
	// Online frames (the room's count) may come in between.
	data, err := readSkipping(ws, `"op":"online"`)
	if err != nil || string(data) != string(body) {
		t.Fatalf("frame %s (%v), want %s", data, err, body)
	}
	for u, want := range map[string]string{
		"http://" + s.PublicAddr() + "/healthz":   `"ok"`,
		"http://" + s.InternalAddr() + "/healthz": `"ok"`,
		"http://" + s.InternalAddr() + "/metrics": "danmaku_comet_push_batches_total",
	} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d %.200s", u, resp.StatusCode, b)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, _, err := ws.NextRaw(5 * time.Second); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("after close: %v, want 1001", err)
	}
	live, err := route.New(redisserver.Client(t)).LiveComets(context.Background())
	if err != nil || live["main-test-comet"].ID != "" {
		t.Fatalf("lease left behind: %v %v", live, err)
	}
}

// The shipped configuration lists every knob of the sections.
func TestConfigFileComplete(t *testing.T) {
	def := DefaultConfig()
	b, err := os.ReadFile("../../configs/comet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range config.Keys(&def) {
		key := k[0][strings.LastIndex(k[0], ".")+1:]
		if !strings.Contains(string(b), key+":") {
			t.Errorf("configs/comet.yaml lacks %s", k[0])
		}
	}
}

// readSkipping returns the next frame that does not contain skip.
func readSkipping(ws *wsviewer.Conn, skip string) ([]byte, error) {
	for {
		_, data, err := ws.NextRaw(10 * time.Second)
		if err != nil || !strings.Contains(string(data), skip) {
			return data, err
		}
	}
}

// The comet serves the demo page only when it knows where logic is, and
// the page carries that address; otherwise / is a JSON 404.
func TestPageOnlyWithAPIBase(t *testing.T) {
	for _, base := range []string{"", "http://localhost:8090"} {
		m := NewMain()
		m.Config.Log.Level = "warn"
		m.Config.Redis.Addrs = []string{redisserver.Standalone(t).Addr}
		m.Config.Comet.Listen = "127.0.0.1:0"
		m.Config.Comet.InternalListen = "127.0.0.1:0"
		m.Config.Comet.ID = testkit.Uniq("page-test-")
		m.Config.Page.APIBase = base
		m.Config.Comet.Secret = "comet-test-push-secret"
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + m.Server.PublicAddr() + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m.Close()
		switch {
		case base == "" && (resp.StatusCode != 404 || !strings.Contains(string(b), `"not_found"`)):
			t.Errorf("without page.api_base: %d %.100s", resp.StatusCode, b)
		case base != "" && (resp.StatusCode != 200 || !strings.Contains(string(b), `content="http://localhost:8090"`)):
			t.Errorf("with page.api_base: %d %.300s", resp.StatusCode, b)
		}
	}
}

// Errors of the comet section keep their "comet." prefix.
func TestConfigErrorsNameTheSection(t *testing.T) {
	m := NewMain()
	m.Config.Comet.Secret = "short"
	err := m.Run(context.Background())
	m.Close()
	if err == nil || !strings.HasPrefix(err.Error(), "config: comet.secret: ") {
		t.Fatalf("Run = %v", err)
	}
	m = NewMain()
	m.Config.Page.APIBase = "localhost:8090"
	err = m.Run(context.Background())
	m.Close()
	if err == nil || !strings.HasPrefix(err.Error(), "config: page.api_base: ") {
		t.Fatalf("Run = %v", err)
	}
}

// The shipped placeholder push secret, and a short one, stop the binary at
// start with the setting named; so does comet.auth jwt without keys.
func TestPlaceholderSecretRefused(t *testing.T) {
	cases := []struct {
		secret, auth, field string
	}{
		{"change-me-push-secret", "off", "comet.secret"},
		{"fifteen-bytes!!", "off", "comet.secret"},
		{"comet-test-push-secret", "jwt", "auth.hmac_secret"},
	}
	for _, tc := range cases {
		m := NewMain()
		m.Config.Redis.Addrs = []string{"127.0.0.1:1"}
		m.Config.Comet.Secret = tc.secret
		m.Config.Comet.Auth = tc.auth
		err := m.Run(context.Background())
		m.Close()
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("secret %q, auth %s: Run = %v, want an error naming %s", tc.secret, tc.auth, err, tc.field)
		}
	}
}
