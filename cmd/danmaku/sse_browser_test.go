package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

// noWebSocket stands in for a browser behind a proxy that breaks
// WebSockets: every WebSocket fails before it opens.
const noWebSocket = `(() => {
  window.__wsTried = 0;
  function Broken() {
    const s = this;
    window.__wsTried++;
    s.readyState = 0;
    setTimeout(() => { s.readyState = 3; if (s.onerror) s.onerror({}); if (s.onclose) s.onclose({ code: 1006, reason: "" }); }, 10);
  }
  Broken.prototype.send = function () {};
  Broken.prototype.close = function () {};
  Broken.OPEN = 1;
  window.WebSocket = Broken;
})();`

// TestBrowserSSEFallback: the demo page in a browser whose WebSockets
// cannot open falls back to SSE by itself and says so; comments typed into
// it and sent elsewhere show once; when its path to the server is cut and
// comes back while comments keep being sent, it opens a new stream that
// resumes with since/epoch, and its chat log ends with every comment
// exactly once and no gap reported.
func TestBrowserSSEFallback(t *testing.T) {
	m := startMain(t)
	room := testkit.Uniq("sse_")
	proxy := newCutProxy(t, m.Addr())
	viewer := dial(t, m, room)
	browser := newBrowser(t)
	blockWS := chromedp.Action[chromedp.Void](func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: noWebSocket})
		return chromedp.Void{}, err
	})
	if err := chromedp.Do(browser, blockWS); err != nil {
		t.Fatal(err)
	}
	tab := openPage(t, browser, proxy.URL(), room, true)
	hookPage(t, tab)
	if tr := evalTo[string](t, tab, `danmakuDemo.client.transport`); tr != "sse" {
		t.Fatalf("transport %q, want sse", tr)
	}
	if txt := evalTo[string](t, tab, `document.querySelector("#conn-text").textContent`); txt != "live (SSE)" {
		t.Errorf("the page says %q, want live (SSE)", txt)
	}
	if n := evalTo[int](t, tab, `__wsTried`); n != 1 {
		t.Errorf("%d WebSockets tried, want 1 before the fallback", n)
	}
	waitOnline(t, m, room, 2)

	ids := send(t, m, room, "before the cut 1", "before the cut 2")
	readIDs(t, viewer, ids)
	waitLogOnce(t, tab, "sent while connected", ids)

	p := &cutPage{m: m, room: room, proxy: proxy, viewer: viewer, tab: tab}
	stream := p.cutWhileSending(t, 6000)
	ids = append(ids, stream...)
	readIDs(t, viewer, stream)
	waitLogOnce(t, tab, "after the reconnect over SSE", ids)
	if gaps := evalTo[[]map[string]any](t, tab, `__gaps`); len(gaps) > 0 {
		t.Errorf("gaps reported on a recoverable cut: %v", gaps)
	}
	var sse []string
	for _, l := range proxy.requestLines() {
		if strings.HasPrefix(l, "GET /ws") {
			t.Errorf("a WebSocket request reached the server: %q", l)
		}
		if strings.HasPrefix(l, "GET /sse?") {
			sse = append(sse, l)
		}
	}
	// (The proxy records the first request of each connection: the first
	// stream may have reused the page's.)
	if len(sse) == 0 || !strings.Contains(sse[len(sse)-1], "since=") {
		t.Errorf("SSE requests %q: want the stream after the cut to resume with since", sse)
	}
	if tr := evalTo[string](t, tab, `danmakuDemo.client.transport`); tr != "sse" {
		t.Errorf("transport after the reconnect %q, want sse", tr)
	}
	after := send(t, m, room, "after the reconnect")
	waitLogOnce(t, tab, "live after the reconnect", append(ids, after...))
	// Comments typed into the page go out through /logic/send as usual.
	sendFromPage(t, tab, "typed over SSE")
	waitShows(t, tab, "the SSE page", "typed over SSE")
}

// TestBrowserSSELastEventID: a browser's own EventSource on /sse (no
// danmaku.js, no since in its URL) across a restart of the server, with
// comments sent before the restart and while the EventSource waits to
// reconnect: it reconnects by itself sending the last event id as
// Last-Event-ID, the stream resumes from it (recovered true), and every
// comment arrives exactly once.
func TestBrowserSSELastEventID(t *testing.T) {
	srv := redisserver.Standalone(t)
	b := kafkabroker.Start(t)
	addr := testkit.FreeAddr(t)
	start := func() *Main { return externalMain(t, srv.Addr, b.Brokers(), addr, "aio-sse-restart") }
	m := start()
	room := testkit.Uniq("sse_id_")
	tab := newBrowser(t)
	if err := chromedp.Do(tab, chromedp.Navigate("http://"+addr+"/healthz")); err != nil {
		t.Fatal(err)
	}
	evalTo[bool](t, tab, `(() => {
  window.__got = {}; window.__order = []; window.__welcomes = []; window.__opens = 0;
  const es = new EventSource("/sse?room=`+room+`");
  es.onopen = () => { window.__opens++; };
  es.onmessage = ev => {
    const f = JSON.parse(ev.data);
    if (f.op === "welcome") window.__welcomes.push(f.recovered === undefined ? null : f.recovered);
    if (f.op === "msgs") for (const msg of f.msgs) {
      window.__got[msg.id] = (window.__got[msg.id] || 0) + 1;
      window.__order.push(msg.id);
    }
  };
  return true;
})()`)
	poll(t, tab, "the first welcome", `__welcomes.length === 1`)
	ids := send(t, m, room, "before 1", "before 2", "before 3")
	poll(t, tab, "the comments before the restart", `__order.length === 3`)

	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	m = start()
	t.Cleanup(func() { m.Close() })
	// The EventSource waits a few seconds before it reconnects: these are
	// sent meanwhile, and come with the resume.
	ids = append(ids, send(t, m, room, "while away 1", "while away 2")...)
	poll(t, tab, "the resume", `__welcomes.length === 2`)
	ids = append(ids, send(t, m, room, "after")...)
	poll(t, tab, "every comment", `__order.length >= `+strconv.Itoa(len(ids)))
	time.Sleep(300 * time.Millisecond) // a second copy would come by now
	got := evalTo[map[string]int](t, tab, `__got`)
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("comment %s shown %d times", id, got[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("%d comments shown, %d sent", len(got), len(ids))
	}
	if w := evalTo[[]any](t, tab, `__welcomes`); len(w) != 2 || w[0] != nil || w[1] != true {
		t.Errorf("welcomes' recovered %v, want [null true] (a fresh join, then the resume by Last-Event-ID)", w)
	}
	if n := evalTo[int](t, tab, `__opens`); n != 2 {
		t.Errorf("the EventSource opened %d times, want 2", n)
	}
}
