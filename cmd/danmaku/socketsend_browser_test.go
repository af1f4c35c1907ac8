package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/testkit"
)

// TestBrowserSocketSend: a signed-in page sends over its WebSocket (the
// comet's send frames), another page of the room shows the comment once; a
// send retried with the same msgId, once on the socket and once over HTTP
// after the socket dropped, keeps its id and is shown once; a refusal on
// the socket rejects like one over HTTP (status, code, field in
// /logic/send's terms).
func TestBrowserSocketSend(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	m := startMain(t, func(c *Config) {
		c.Logic.Auth, c.Comet.Auth, c.Auth.HMACSecret = "jwt", "jwt", secret
	})
	room := testkit.Uniq("socksend_")
	browser := newBrowser(t)
	open := func(uid int64, first bool) context.Context {
		tok, err := auth.Mint([]byte(secret), auth.Claims{UID: uid, Name: "user " + strconv.FormatInt(uid, 10),
			ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		tab := browser
		if !first {
			var cancel context.CancelFunc
			tab, cancel = chromedp.NewContext(browser)
			t.Cleanup(cancel)
		}
		if err := chromedp.Do(tab, chromedp.Navigate(m.URL()+"?room="+room+"#token="+tok)); err != nil {
			t.Fatal(err)
		}
		poll(t, tab, "the page connects", `danmakuDemo.client.state === "open" && danmakuDemo.client.socketSend`)
		return tab
	}
	a, b := open(7101, true), open(7102, false)
	sendFromPage(t, a, "typed on a socket")
	waitShows(t, b, "the other page", "typed on a socket")
	if over := evalTo[string](t, a, `danmakuDemo.client.sentOver`); over != "socket" {
		t.Fatalf("the page sent over %q, want the socket", over)
	}

	type answer struct {
		IDs    []string `json:"ids"`
		Over   string   `json:"over"`
		Status int      `json:"status"`
		Code   string   `json:"code"`
		Field  string   `json:"field"`
	}
	run := func(js string) answer {
		t.Helper()
		res, err := chromedp.Run(a, chromedp.Evaluate[answer](`(async () => { const c = danmakuDemo.client;
			try { const r = await (`+js+`); return {ids: r.msgIds, over: c.sentOver}; }
			catch (e) { return {status: e.status, code: e.code, field: e.field, over: c.sentOver}; } })()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := run(`c.send("retried", {msgId: "same1"})`)
	again := run(`c.send("retried", {msgId: "same1"})`)
	if first.Over != "socket" || again.Over != "socket" || len(first.IDs) != 1 || first.IDs[0] != "u7101-same1" || again.IDs[0] != first.IDs[0] {
		t.Fatalf("send and retry on the socket: %+v, %+v", first, again)
	}
	// The socket drops with the send in flight: the retry goes over HTTP,
	// with the same msgId.
	dropped := run(`(() => { const p = c.send("retried", {msgId: "same1"}); c.ws.close(4000, "test drop"); return p; })()`)
	if dropped.Over != "http" || len(dropped.IDs) != 1 || dropped.IDs[0] != first.IDs[0] {
		t.Fatalf("send across a dropped socket: %+v, want %s over http", dropped, first.IDs[0])
	}
	poll(t, a, "the page reconnects", `danmakuDemo.client.state === "open" && danmakuDemo.client.socketSend`)
	bad := run(`c.send("\u200b")`)
	if bad.Over != "socket" || bad.Status != 400 || bad.Code != "invalid_argument" || bad.Field != "messages[0].content" {
		t.Fatalf("a blank comment on the socket: %+v", bad)
	}
	waitShows(t, b, "the other page", "retried")
	time.Sleep(time.Second)
	n := evalTo[int](t, b, `[...document.querySelectorAll("#log li")].filter(e => e.textContent.includes("retried")).length`)
	if n != 1 {
		t.Fatalf("the other page's log shows the retried comment %d times, want once", n)
	}
}
