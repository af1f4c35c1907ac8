package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium; .ci/run installs it. The test uses it
// as is and never downloads a browser.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts headless chromium and returns the context of its first
// tab. Further tabs are chromedp.NewContext(first).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium is required for the browser test (apt-get install chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	tctx, cancelTimeout := context.WithTimeout(ctx, 50*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	// Start the browser now so a start-up failure is reported as such.
	if err := chromedp.Do(tctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return tctx
}

// newTab returns the first tab of browser when first, else a new tab
// closed when the test ends.
func newTab(t *testing.T, browser context.Context, first bool) context.Context {
	if first {
		return browser
	}
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	return tab
}

// openPage opens the demo page for room in a new tab of browser and waits
// until its client has joined.
func openPage(t *testing.T, browser context.Context, base, room string, first bool) context.Context {
	t.Helper()
	tab := newTab(t, browser, first)
	err := chromedp.Do(tab,
		chromedp.Navigate(base+"?room="+room),
		chromedp.Poll[chromedp.Void](`document.querySelector("#conn").dataset.state === "open" && danmakuDemo.client.room === `+strconv.Quote(room),
			chromedp.WithPollingTimeout(15*time.Second)),
	)
	if err != nil {
		t.Fatalf("open page for room %s: %v", room, err)
	}
	return tab
}

// shows is a JavaScript predicate: the page shows text, in the chat log or
// on the stage.
func shows(text string) string {
	q := strconv.Quote(text)
	return fmt.Sprintf(`[...document.querySelectorAll("#log li, #layer .bullet")].some(e => e.textContent.includes(%s))`, q)
}

// sendFromPage types text into the page's composer and submits it, as a
// viewer would. Both happen in one evaluation: the page clears the
// composer when its previous send is answered, which between two steps
// could empty the text before the submit reads it.
func sendFromPage(t *testing.T, tab context.Context, text string) {
	t.Helper()
	err := chromedp.Do(tab,
		chromedp.Evaluate[chromedp.Void](`(() => { document.querySelector("#text").value = `+strconv.Quote(text)+`;
			document.querySelector("#composer").requestSubmit(); })()`),
	)
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
}

func waitShows(t *testing.T, tab context.Context, who, text string) {
	t.Helper()
	err := chromedp.Do(tab, chromedp.Poll[chromedp.Void](shows(text),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("%s does not show %q: %v", who, text, err)
	}
}

func pageShows(t *testing.T, tab context.Context, text string) bool {
	t.Helper()
	ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](shows(text)))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestBrowserRooms drives the real demo page in headless chromium against
// the all-in-one binary: two pages in one room both show a comment typed
// into one of them; a page in another room does not, until it switches to
// the room on its open socket.
func TestBrowserRooms(t *testing.T) {
	m := startMain(t)
	base := m.URL()
	browser := newBrowser(t)

	room, other := "browser_a", "browser_b"
	a := openPage(t, browser, base, room, true)
	b := openPage(t, browser, base, room, false)
	c := openPage(t, browser, base, other, false)

	text := "hello from page A " + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	sendFromPage(t, a, text)
	waitShows(t, a, "sender page", text)
	waitShows(t, b, "second page of the room", text)

	// The other room's page is live: its own comment reaches it, and by
	// then the first room's comment, delivered before, would have too.
	marker := "only for room B"
	sendFromPage(t, c, marker)
	waitShows(t, c, "page of the other room", marker)
	if pageShows(t, c, text) {
		t.Errorf("page of room %s shows a comment of room %s", other, room)
	}
	// The page's online count comes from GET /logic/online through the
	// library: two viewers in the first room, one in the other.
	for name, tc := range map[string]struct {
		tab  context.Context
		want int
	}{"A": {a, 2}, "C": {c, 1}} {
		n, err := chromedp.Run(tc.tab, chromedp.Evaluate[int](`danmakuDemo.client.online()`, chromedp.EvalAwaitPromise))
		if err != nil || n != tc.want {
			t.Errorf("page %s: online() = %d, %v; want %d", name, n, err, tc.want)
		}
	}
	for name, tab := range map[string]context.Context{"A": a, "B": b} {
		if pageShows(t, tab, marker) {
			t.Errorf("page %s of room %s shows a comment of room %s", name, room, other)
		}
	}

	// Switching rooms on the open socket: page C joins the first room and
	// from then on shows its comments.
	err := chromedp.Do(c,
		chromedp.Evaluate[chromedp.Void](`danmakuDemo.switchRoom(`+strconv.Quote(room)+`)`),
		chromedp.Poll[chromedp.Void](`danmakuDemo.client.state === "open" && [...document.querySelectorAll("#log li.sys")].some(e => e.textContent === "joined #`+room+`")`,
			chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		t.Fatalf("switch page C to room %s: %v", room, err)
	}
	after := "after the switch"
	sendFromPage(t, b, after)
	waitShows(t, c, "page switched to the room", after)
}

// TestBrowserClientLibrary checks danmaku.js in the browser: a batch is
// spread over time following the messages' ts, except a high-priority
// message, shown at once; ids already shown are dropped, also across
// batches, and a lost socket reconnects by itself.
func TestBrowserClientLibrary(t *testing.T) {
	m := startMain(t)
	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(m.URL())); err != nil {
		t.Fatal(err)
	}
	// A client that never connects: batches are fed to it directly.
	const script = `new Promise(resolve => {
		const shown = [];
		const c = new DanmakuClient({room: "r", paceMs: 1000, seenIds: 16,
			onMessage: m => shown.push({id: m.id, at: performance.now()})});
		const t0 = 1700000000000;
		const batch = [0, 200, 400, 600, 800].map(d => ({id: "m" + d, ts: t0 + d, content: "x"}));
		batch.push({id: "m0", ts: t0, content: "dup in batch"});
		batch.push({id: "h900", ts: t0 + 900, content: "high", priority: 1});
		c._onFrame({op: "msgs", room: "r", msgs: batch});
		c._onFrame({op: "msgs", room: "r", msgs: [{id: "m800", ts: t0 + 800}]});  // redelivered
		c._onFrame({op: "msgs", room: "other", msgs: [{id: "x1", ts: t0}]});      // not our room
		setTimeout(() => {
			const ids = shown.map(s => s.id);
			const span = shown.length ? shown[shown.length - 1].at - shown[0].at : 0;
			const high = shown.find(s => s.id === "h900");
			const highAfter = high && shown.length ? high.at - shown[0].at : -1;
			const seen = new DanmakuClient.SeenSet(2);
			seen.add("a"); seen.add("b"); seen.add("c");
			resolve({ids, span, highAfter, evicted: !seen.has("a") && seen.has("b") && seen.has("c")});
		}, 1300);
	})`
	type result struct {
		IDs       []string `json:"ids"`
		Span      float64  `json:"span"`
		HighAfter float64  `json:"highAfter"`
		Evicted   bool     `json:"evicted"`
	}
	res, err := chromedp.Run(browser, chromedp.Evaluate[result](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"m0", "h900", "m200", "m400", "m600", "m800"}
	if fmt.Sprint(res.IDs) != fmt.Sprint(want) {
		t.Errorf("shown %v, want %v (in order, each once, nothing of another room)", res.IDs, want)
	}
	// 800 ms of server time are replayed over about 800 ms, not at once.
	if res.Span < 600 || res.Span > 1100 {
		t.Errorf("batch spread over %.0f ms, want about 800", res.Span)
	}
	// The high-priority message of the batch's end is shown with its first.
	if res.HighAfter < 0 || res.HighAfter > 100 {
		t.Errorf("high-priority message shown %.0f ms after the batch's first, want at once", res.HighAfter)
	}
	if !res.Evicted {
		t.Error("SeenSet does not forget its oldest id at capacity")
	}

	// Reconnect: the page's client loses its socket and comes back by
	// itself, through "reconnecting", with the backoff's short first delay.
	const drop = `(() => {
		const c = danmakuDemo.client, orig = c.opts.onState;
		window.__states = [];
		c.opts.onState = (s, i) => { __states.push(s); orig(s, i); };
		window.__oldSocket = c.ws;
		c.ws.close(4000, "test drop");
	})()`
	err = chromedp.Do(browser,
		chromedp.Poll[chromedp.Void](`danmakuDemo.client.state === "open"`, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Evaluate[chromedp.Void](drop),
		chromedp.Poll[chromedp.Void](`__states.includes("reconnecting") && danmakuDemo.client.state === "open" && danmakuDemo.client.ws !== __oldSocket`,
			chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		states, _ := chromedp.Run(browser, chromedp.Evaluate[[]string](`window.__states || []`))
		t.Fatalf("client did not reconnect (states %v): %v", states, err)
	}
}
