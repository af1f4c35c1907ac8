package main

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/internal/testkit"
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
