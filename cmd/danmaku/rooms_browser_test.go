package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// roomsPage is a danmaku.js client in chromium, reaching the all-in-one
// server through a cutProxy; it records every message it shows as
// "room id" (plus " r" when replayed).
type roomsPage struct {
	m     *Main
	proxy *cutProxy
	tab   context.Context
	uid   atomic.Int64
}

// post sends one comment to room, each from its own user (the rate limit
// is per user), and returns its id.
func (p *roomsPage) post(t *testing.T, room, content string) string {
	t.Helper()
	ids, err := postAs(p.m.Addr(), room, 7000+p.uid.Add(1), content)
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

// expectShown waits until the client showed every entry of want and then
// requires exactly want: each once, nothing else.
func (p *roomsPage) expectShown(t *testing.T, what string, want []string) {
	t.Helper()
	js := `((want) => want.every(w => __got.includes(w)))(` + jsList(want) + `)`
	err := chromedp.Do(p.tab, chromedp.Poll[chromedp.Void](js,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	got := evalTo[[]string](t, p.tab, `__got`)
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("%s: shown %q, want %q (%v)", what, got, want, err)
	}
}

func jsList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// TestBrowserSubscribe: one danmaku.js client holds three rooms (one from
// its options, one subscribed while the socket opens, one on the open
// socket) and shows exactly their comments, each with its room, and
// nothing of a fourth; unsubscribe stops a room; after the path was cut,
// the reconnect resumes every room it holds (since/epoch per room in the
// URL) and shows what each missed once, as replayed; join leaves every
// other room.
func TestBrowserSubscribe(t *testing.T) {
	p := &roomsPage{m: startMain(t)}
	p.proxy = newCutProxy(t, p.m.Addr())
	p.tab = newBrowser(t)
	a, b, c, d := testkit.Uniq("sub_a"), testkit.Uniq("sub_b"), testkit.Uniq("sub_c"), testkit.Uniq("sub_d")
	if err := chromedp.Do(p.tab, chromedp.Navigate(p.proxy.URL())); err != nil {
		t.Fatal(err)
	}
	evalTo[bool](t, p.tab, fmt.Sprintf(`(() => {
		window.__got = []; window.__errs = [];
		window.__c = new DanmakuClient({room: %q, url: %q, backoffMinMs: 200, backoffMaxMs: 800,
			onMessage: (m, meta) => __got.push(meta.room + " " + m.id + (meta.replay ? " r" : "")),
			onError: e => __errs.push(e.code + " " + e.room)});
		__c.connect();
		__c.subscribe(%q);
		return true; })()`, a, "ws://"+strings.TrimPrefix(p.proxy.URL(), "http://")+"ws", b))
	poll(t, p.tab, "client open", `__c.state === "open"`)
	evalTo[bool](t, p.tab, fmt.Sprintf(`__c.subscribe(%q) && true`, c))
	// Direct viewers tell when a room's comments have been broadcast.
	watchers := map[string]*wsviewer.Conn{}
	for _, r := range []string{a, b, c, d} {
		watchers[r] = dial(t, p.m, r)
		waitOnline(t, p.m, r, map[bool]int64{true: 1, false: 2}[r == d])
	}
	var want []string
	for _, r := range []string{a, b, c} {
		want = append(want, r+" "+p.post(t, r, "to "+r))
	}
	dFirst := p.post(t, d, "to the room not held")
	readIDs(t, watchers[d], []string{dFirst})
	last := p.post(t, a, "after the other room's")
	want = append(want, a+" "+last)
	p.expectShown(t, "three rooms held", want)

	evalTo[bool](t, p.tab, fmt.Sprintf(`__c.unsubscribe(%q) && true`, b))
	waitOnline(t, p.m, b, 1)
	readIDs(t, watchers[b], []string{p.post(t, b, "to the room left")})
	want = append(want, a+" "+p.post(t, a, "after the unsubscribe"))
	p.expectShown(t, "after the unsubscribe", want)

	// Cut: comments of both rooms while the page is away come back replayed.
	p.proxy.setDown(true)
	p.proxy.cut()
	poll(t, p.tab, "client notices the cut", `__c.state !== "open"`)
	for _, r := range []string{a, c, a, c} {
		id := p.post(t, r, "while away")
		readIDs(t, watchers[r], []string{id})
		want = append(want, r+" "+id+" r")
	}
	p.proxy.setDown(false)
	poll(t, p.tab, "client reconnects", `__c.state === "open"`)
	p.expectShown(t, "resumed rooms", want)
	lines := p.proxy.requestLines()
	var ws string
	for _, l := range lines {
		// The page's own lobby client reconnects too, before or after.
		if strings.HasPrefix(l, "GET /ws?") && !strings.Contains(l, "room=lobby") {
			ws = l
		}
	}
	if !strings.Contains(ws, "room="+a+"&since=") || !strings.Contains(ws, "&room="+c+"&since."+c+"=") ||
		!strings.Contains(ws, "&epoch."+c+"=") || strings.Contains(ws, b) {
		t.Errorf("reconnect %q: want room %s resumed by since/epoch and %s by since.ROOM/epoch.ROOM", ws, a, c)
	}
	for _, r := range []string{a, c} {
		waitOnline(t, p.m, r, 2)
		want = append(want, r+" "+p.post(t, r, "live after the reconnect"))
	}
	p.expectShown(t, "live after the reconnect", want)

	// join switches: the other rooms are left.
	evalTo[bool](t, p.tab, fmt.Sprintf(`__c.join(%q) && true`, d))
	waitOnline(t, p.m, d, 2)
	waitOnline(t, p.m, a, 1)
	waitOnline(t, p.m, c, 1)
	readIDs(t, watchers[a], []string{p.post(t, a, "to a room left by the join")})
	id := p.post(t, d, "after the join")
	want = append(want, d+" "+dFirst+" r", d+" "+id) // the room's history, then live
	p.expectShown(t, "after the join", want)
	if errs := evalTo[[]string](t, p.tab, `__errs`); len(errs) > 0 {
		t.Errorf("errors reported: %q", errs)
	}
}

// TestBrowserClientRooms feeds frames to danmaku.js (no server behind it):
// the URL names every room held with its own since/epoch, rooms changed
// while the socket opens are asked for once it is open, frames of rooms not
// held are ignored, every message's meta names its room, and rooms the
// server refuses or a ban takes away are dropped (the last one's ban
// leaves the client in it, for the close to name).
func TestBrowserClientRooms(t *testing.T) {
	m := startMain(t)
	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(m.URL())); err != nil {
		t.Fatal(err)
	}
	const script = `(() => {
		const out = {}, got = [], sent = [], errs = [];
		const c = new DanmakuClient({room: "a", url: "ws://127.0.0.1:9/ws",
			onMessage: (m, meta) => got.push(meta.room + ":" + m.id + (meta.replay ? "/r" : "")),
			onError: e => errs.push(e.code + ":" + e.room)});
		c.subscribe("b"); c.subscribe("c.x"); c.subscribe("b");
		out.fresh = c._wsURL();
		c._onFrame({op: "welcome", room: "a", connId: "c1", online: 1, epoch: "EA", pos: 3});
		c._onFrame({op: "welcome", room: "b", connId: "c1", online: 2, epoch: "EB", pos: 5});
		c._onFrame({op: "msgs", room: "b", epoch: "EB", replay: true, msgs: [{id: "b5", pos: 5, ts: 1}]});
		c._onFrame({op: "msgs", room: "z", epoch: "EZ", replay: true, msgs: [{id: "z1", pos: 1, ts: 1}]});
		out.resume = c._wsURL();
		// The socket opens after a join elsewhere was asked for, or after rooms changed.
		const ws = {readyState: WebSocket.OPEN, send: s => sent.push(JSON.parse(s)), close() {}};
		c.unsubscribe("c.x"); c.subscribe("d");
		c._catchUpRooms(ws, ["a", "b", "c.x"]);
		out.afterOpen = sent.splice(0);
		c.ws = ws;
		c.subscribe("e"); c.unsubscribe("d"); c.unsubscribe("nope");
		out.onOpen = sent.splice(0);
		// Refusals: a sub beyond the limit, a room outside the token, a ban.
		c._onFrame({op: "error", room: "e", code: "too_many_rooms", message: "x"});
		c._onFrame({op: "error", room: "b", code: "banned", message: "x"});
		out.rooms = c._rooms();
		c._onFrame({op: "msgs", room: "b", epoch: "EB", replay: true, msgs: [{id: "b6", pos: 6, ts: 1}]});
		c._onFrame({op: "error", room: "a", code: "banned", message: "x"});
		out.last = c._rooms();
		c.join("f");
		out.joined = c._rooms();
		out.join = sent.splice(0);
		c.ws = null;
		out.got = got; out.errs = errs;
		return out; })()`
	type result struct {
		Fresh, Resume                  string
		AfterOpen, OnOpen, Join        []map[string]any
		Rooms, Last, Joined, Got, Errs []string
	}
	res := evalTo[result](t, browser, script)
	check := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	check("URL of a first connect", res.Fresh, "ws://127.0.0.1:9/ws?room=a&room=b&room=c.x")
	check("URL of a reconnect", res.Resume, "ws://127.0.0.1:9/ws?room=a&since=3&epoch=EA&room=b&since.b=5&epoch.b=EB&room=c.x")
	check("frames once the socket opened", res.AfterOpen, []map[string]any{
		{"op": "unsub", "room": "c.x"}, {"op": "sub", "room": "d"}})
	check("frames on the open socket", res.OnOpen, []map[string]any{
		{"op": "sub", "room": "e"}, {"op": "unsub", "room": "d"}})
	check("rooms after the refusals", res.Rooms, []string{"a"})
	check("rooms after the last room's ban", res.Last, []string{"a"})
	check("rooms after a join", res.Joined, []string{"f"})
	check("join frame", res.Join, []map[string]any{{"op": "join", "room": "f"}})
	check("messages", res.Got, []string{"b:b5/r"})
	check("errors", res.Errs, []string{"too_many_rooms:e", "banned:b", "banned:a"})
}
