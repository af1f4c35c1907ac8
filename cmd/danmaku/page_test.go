package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/web"
)

// evalTo runs a JavaScript expression (a promise is awaited) in tab.
func evalTo[T any](t *testing.T, tab context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%.80s: %v", js, err)
	}
	return v
}

func poll(t *testing.T, tab context.Context, what, js string) {
	t.Helper()
	err := chromedp.Do(tab, chromedp.Poll[chromedp.Void](js,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// closedURL is an http URL nothing listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return "http://" + ln.Addr().String()
}

// TestBrowserPage covers what a visitor of the demo page sees: each tab is
// its own guest until a name is chosen, the online count follows the
// server's frames without polling, lengths count characters as the server
// does, a room switch clears the chat, the badge says OFFLINE while
// reconnecting, and an unreachable server is said in words.
func TestBrowserPage(t *testing.T) {
	m := startMain(t)
	base := m.URL()
	browser := newBrowser(t)
	room := "page_details"
	a := openPage(t, browser, base, room, true)
	b := openPage(t, browser, base, room, false)

	idA, idB := evalTo[int64](t, a, `danmakuDemo.userId`), evalTo[int64](t, b, `danmakuDemo.userId`)
	nameA, nameB := evalTo[string](t, a, `document.querySelector("#name").value`), evalTo[string](t, b, `document.querySelector("#name").value`)
	if idA == idB || nameA == nameB {
		t.Errorf("two tabs share an identity: %d %q, %d %q", idA, nameA, idB, nameB)
	}
	// A joined first (welcome: 1 viewer); only an online frame tells it of B.
	poll(t, a, "page A shows 2 viewers", `document.querySelector("#online").textContent === "2"`)
	if n := evalTo[int](t, b, `performance.getEntriesByType("resource").filter(e => e.name.includes("/logic/online")).length`); n != 0 {
		t.Errorf("page polled /logic/online %d times", n)
	}

	// 250 emoji typed: 200 kept (code points, as the server counts), and
	// all 200 arrive.
	kept := evalTo[int](t, a, `(() => { const el = document.querySelector("#text");
		el.value = "😀".repeat(250); el.dispatchEvent(new Event("input"));
		return danmakuDemo.chars(el.value); })()`)
	if kept != 200 {
		t.Fatalf("composer kept %d characters, want 200", kept)
	}
	evalTo[bool](t, a, `danmakuDemo.post(document.querySelector("#text").value).then(() => true)`)
	waitShows(t, b, "second tab", strings.Repeat("😀", 200))

	// Choosing a name shares it (and the user id) with new tabs.
	evalTo[bool](t, a, `(() => { const n = document.querySelector("#name"); n.value = "Ann";
		n.dispatchEvent(new Event("change")); return true; })()`)
	c := openPage(t, browser, base, room, false)
	if evalTo[string](t, c, `document.querySelector("#name").value`) != "Ann" || evalTo[int64](t, c, `danmakuDemo.userId`) != idA {
		t.Error("a chosen name is not kept for new tabs")
	}

	// A room switch shows only the new room's chat.
	evalTo[bool](t, a, `(danmakuDemo.switchRoom("page_details_2"), true)`)
	poll(t, a, "switch", `danmakuDemo.client.state === "open" && danmakuDemo.client.room === "page_details_2"`)
	if pageShows(t, a, "😀😀😀") {
		t.Error("the old room's chat lines stayed after the switch")
	}

	// While reconnecting the badge is not LIVE and the count is unknown.
	evalTo[bool](t, b, `(() => { const c = danmakuDemo.client, orig = c.opts.onState;
		window.__badges = [];
		c.opts.onState = (s, i) => { orig(s, i); if (s === "reconnecting")
			__badges.push(document.querySelector("#live").textContent + "/" + document.querySelector("#online").textContent); };
		c.ws.close(4000, "test drop"); return true; })()`)
	poll(t, b, "reconnect", `__badges.length > 0 && danmakuDemo.client.state === "open"`)
	if got := evalTo[string](t, b, `__badges[0]`); got != "OFFLINE/–" {
		t.Errorf("badge/online while reconnecting = %q, want OFFLINE/–", got)
	}
	if evalTo[string](t, b, `document.querySelector("#live").textContent`) != "LIVE" {
		t.Error("badge not LIVE after reconnecting")
	}

	// A server that cannot be reached is said so, not "Failed to fetch".
	dead := closedURL(t)
	err := evalTo[map[string]string](t, b, `new DanmakuClient({baseUrl: "`+dead+`"}).send("x", {userId: 1, userName: "a"})
		.then(() => ({}), e => ({code: e.code, message: e.message}))`)
	if err["code"] != "unavailable" || !strings.Contains(err["message"], "cannot reach the server") {
		t.Errorf("send to a dead server: %v", err)
	}
	evalTo[bool](t, b, `(danmakuDemo.client.opts.baseUrl = "`+dead+`", danmakuDemo.post("x").then(() => true, () => true))`)
	if hint := evalTo[string](t, b, `document.querySelector("#hint").textContent`); !strings.HasPrefix(hint, "cannot reach the server") {
		t.Errorf("hint %q", hint)
	}
}

// TestBrowserJoinBadRoom: join with an invalid room id throws and leaves
// the client open in its room, still receiving it; a join the server
// refuses is followed back to the room the server kept.
func TestBrowserJoinBadRoom(t *testing.T) {
	m := startMain(t)
	browser := newBrowser(t)
	room := "bad_join"
	tab := openPage(t, browser, m.URL(), room, true)
	res := evalTo[map[string]string](t, tab, `(() => { const c = danmakuDemo.client;
		try { c.join("bad room"); return {threw: "no"}; } catch (e) { return {threw: e.code, state: c.state, room: c.room}; } })()`)
	if res["threw"] != "invalid_argument" || res["state"] != "open" || res["room"] != room {
		t.Fatalf("join(\"bad room\"): %v", res)
	}
	sendFromPage(t, tab, "still in the room")
	waitShows(t, tab, "page after a refused join", "still in the room")

	// Bypass the library's check: the server answers bad_room and keeps
	// the viewer where it was; the client follows.
	evalTo[bool](t, tab, `(() => { const c = danmakuDemo.client; c.room = "a:b";
		c.ws.send(JSON.stringify({op: "join", room: "a:b"})); return true; })()`)
	poll(t, tab, "client back in its room", `danmakuDemo.client.room === "`+room+`" && danmakuDemo.client.state === "open"`)
	sendFromPage(t, tab, "after the server refused")
	waitShows(t, tab, "page after a server-refused join", "after the server refused")
}

// TestBrowserClientDocExample runs the danmaku.js example of
// docs/client.md as a classic script: it must load without a page error and
// get its answers.
func TestBrowserClientDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/client.md")
	if err != nil {
		t.Fatal(err)
	}
	mt := regexp.MustCompile("(?s)```html\n<script src=\"/danmaku.js\"></script>\n<script>\n(.*?)</script>\n```").FindSubmatch(doc)
	if mt == nil {
		t.Fatal("docs/client.md lacks the danmaku.js example")
	}
	m := startMain(t)
	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(m.URL()+"?room=client_doc_example")); err != nil {
		t.Fatal(err)
	}
	evalTo[bool](t, browser, `(() => { window.__logs = []; window.__errors = [];
		addEventListener("error", e => __errors.push(String(e.message)));
		const log = console.log, err = console.error;
		console.log = (...a) => { __logs.push(a.map(String).join(" ")); log(...a); };
		console.error = (...a) => { __errors.push(a.map(String).join(" ")); err(...a); };
		const s = document.createElement("script");
		s.textContent = `+strconv.Quote(string(mt[1]))+`;
		document.body.appendChild(s); return true; })()`)
	err = chromedp.Do(browser, chromedp.Poll[chromedp.Void](`__errors.length > 0 || __logs.some(l => l.startsWith("online:"))`,
		chromedp.WithPollingTimeout(15*time.Second)))
	errs := evalTo[[]string](t, browser, `__errors`)
	if err != nil || len(errs) > 0 {
		t.Fatalf("docs/client.md example: %v, errors %v, logs %v", err, errs, evalTo[[]string](t, browser, `__logs`))
	}
}

// TestBrowserPageOnOtherOrigin is the comet binary's setup: the page is
// served on one origin (with /ws) and calls logic's API on another, which
// lists the page's origin in logic.allowed_origins. Sending works, the
// count and the metrics link point at the API.
func TestBrowserPageOnOtherOrigin(t *testing.T) {
	var h atomic.Value
	pageSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Load().(http.Handler).ServeHTTP(w, r)
	}))
	defer pageSrv.Close()

	m := NewMain()
	m.Config.Log.Level = "warn"
	m.Config.Logic.Listen = "127.0.0.1:0"
	m.Config.Job.SessionTimeout = time.Second
	m.Config.Kafka.Partitions = 2
	m.Config.Logic.AllowedOrigins = []string{pageSrv.URL}
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	api := strings.TrimSuffix(m.URL(), "/")
	mux := http.NewServeMux()
	mux.Handle("/ws", m.comet.PublicHandler())
	mux.Handle("/", web.Handler(web.Config{APIBase: api}))
	h.Store(http.Handler(mux))

	browser := newBrowser(t)
	tab := openPage(t, browser, pageSrv.URL+"/", "other_origin", true)
	if href := evalTo[string](t, tab, `document.querySelector("#metrics-link").href`); href != api+"/metrics" {
		t.Errorf("metrics link %q, want %s/metrics", href, api)
	}
	sendFromPage(t, tab, "sent across origins")
	waitShows(t, tab, "page on another origin", "sent across origins")
	if n := evalTo[int](t, tab, `danmakuDemo.client.online()`); n != 1 {
		t.Errorf("online() across origins = %d", n)
	}
}

// Every error of the public port has the JSON shape, unknown paths too.
func TestUnknownPathsAnswerJSON(t *testing.T) {
	m := startMain(t)
	for _, tc := range []struct {
		method, path string
		status       int
	}{{"GET", "/nope", 404}, {"GET", "/logic/nope", 404}, {"POST", "/", 405}, {"GET", "/ws", 400}} {
		req, _ := http.NewRequest(tc.method, "http://"+m.Addr()+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || body.Error.Code == "" || body.Error.Message == "" {
			t.Errorf("%s %s: %d %+v %v", tc.method, tc.path, resp.StatusCode, body, err)
		}
	}
}
