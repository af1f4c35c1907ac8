package main

import (
	"testing"
	"time"
)

// TestBrowserHeartbeat keeps the demo page open in headless chromium over a
// compressed socket with a 1 s ping period and a 3 s pong_wait: the page's
// heartbeats (danmaku.js sends {"op":"ping"} every heartbeatMs, compressed
// by the browser) are answered, so neither side gives the connection up
// (danmaku.js closes it after 2 heartbeats and 5 s without a frame, the
// comet after pong_wait without one, and it does not ping a viewer that
// heartbeats), for longer than either would wait.
func TestBrowserHeartbeat(t *testing.T) {
	m := startMain(t, func(c *Config) {
		c.Comet.PingPeriod = time.Second
		c.Comet.PongWait = 3 * time.Second
	})
	tab := openPage(t, newBrowser(t), m.URL(), "heartbeat_room", true)
	if ext := evalTo[string](t, tab, `danmakuDemo.client.ws.extensions`); ext == "" {
		t.Fatal("the page's socket is not compressed")
	}
	if hb := evalTo[int](t, tab, `danmakuDemo.client.heartbeatMs`); hb != 1000 {
		t.Fatalf("heartbeatMs %d, want 1000", hb)
	}
	evalTo[bool](t, tab, `(window.firstSocket = danmakuDemo.client.ws, true)`)
	time.Sleep(10 * time.Second)
	if same := evalTo[bool](t, tab, `danmakuDemo.client.ws === window.firstSocket && window.firstSocket.readyState === 1`); !same {
		t.Fatal("the page's socket was closed while it sent heartbeats")
	}
	if age := evalTo[int](t, tab, `Date.now() - danmakuDemo.client.lastHeard`); age > 2500 {
		t.Fatalf("the page last heard from the comet %d ms ago, with a heartbeat every second", age)
	}
}
