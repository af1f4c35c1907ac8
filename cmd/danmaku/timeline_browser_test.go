package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// TestBrowserClientTimeline feeds frames to danmaku.js's frame handler in
// chromium (no server behind it): the client keeps each room's epoch and
// last position, resumes from them in the /ws URL and in a join, hands
// replayed frames over at once and marked, after the live messages still
// being paced, and reports gaps through onGap.
func TestBrowserClientTimeline(t *testing.T) {
	m := startMain(t)
	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(m.URL())); err != nil {
		t.Fatal(err)
	}
	const script = `new Promise(resolve => {
		const out = {}, got = [], gaps = [], sent = [], batches = [];
		const c = new DanmakuClient({room: "r", url: "ws://127.0.0.1:9/ws", paceMs: 1000,
			onMessage: (m, meta) => got.push(m.id + (meta.replay ? "/replay" : "")),
			onBatch: (room, msgs, meta) => batches.push(room + ":" + msgs.length + ":" + meta.replay),
			onGap: g => gaps.push(g)});
		const t0 = Date.now();
		out.freshURL = c._wsURL();
		c._onFrame({op: "welcome", room: "r", connId: "c1", online: 1, heartbeatMs: 25000, epoch: "E1", pos: 7});
		out.afterWelcome = c.position("r");
		// The room's recent history: given at once, in position order.
		c._onFrame({op: "msgs", room: "r", epoch: "E1", replay: true, msgs: [
			{id: "h6", pos: 6, ts: t0 - 60}, {id: "h5", pos: 5, ts: t0 - 50}, {id: "h7", pos: 7, ts: t0 - 70}]});
		out.afterHistory = got.slice();
		// Live: paced; an older position or a seen id moves nothing.
		c._onFrame({op: "msgs", room: "r", epoch: "E1", msgs: [{id: "q8", pos: 8, ts: t0}, {id: "q9", pos: 9, ts: t0 + 600}]});
		c._onFrame({op: "msgs", room: "r", epoch: "E1", msgs: [{id: "h5", pos: 5, ts: t0}]});
		out.afterLive = c.position("r");
		out.queued = c.queue.length;
		// The socket is lost: the reconnect asks for what follows 9.
		out.resumeURL = c._wsURL();
		c._onFrame({op: "welcome", room: "r", connId: "c2", online: 1, heartbeatMs: 25000, epoch: "E1", pos: 11, recovered: true});
		out.afterRecovered = c.position("r");
		c._onFrame({op: "msgs", room: "r", epoch: "E1", replay: true, msgs: [
			{id: "q9", pos: 9, ts: t0 + 600}, {id: "r11", pos: 11, ts: t0 + 900}, {id: "r10", pos: 10, ts: t0 + 800}]});
		out.afterReplay = got.slice();
		out.queuedAfterReplay = c.queue.length;
		out.afterReplayPos = c.position("r");
		// A resume the server cannot serve.
		c._wsURL();
		c._onFrame({op: "welcome", room: "r", connId: "c3", online: 1, heartbeatMs: 25000, epoch: "E2", pos: 3, recovered: false});
		out.afterRefused = c.position("r");
		// The history is lost while connected: a live frame of a new epoch.
		c._onFrame({op: "msgs", room: "r", epoch: "E3", msgs: [{id: "n1", pos: 1, ts: t0 + 1000}]});
		out.afterNewEpoch = c.position("r");
		out.gaps = gaps.slice();
		// Joins on an open socket: fresh for a new room, resumed for one it had.
		c.ws = {readyState: WebSocket.OPEN, send: s => sent.push(JSON.parse(s)), close() {}};
		c.join("other");
		c._onFrame({op: "welcome", room: "other", connId: "c3", online: 1, heartbeatMs: 25000, epoch: "F1", pos: 4});
		c.join("r");
		c._onFrame({op: "msgs", room: "other", epoch: "F1", msgs: [{id: "o5", pos: 5, ts: t0}]}); // left: ignored
		out.sent = sent;
		out.other = c.position("other");
		c.ws = null;
		// A server without timelines: no positions, no resume.
		const old = new DanmakuClient({room: "x", url: "ws://127.0.0.1:9/ws"});
		old._onFrame({op: "welcome", room: "x", connId: "c4", online: 1, heartbeatMs: 25000});
		old._onFrame({op: "msgs", room: "x", msgs: [{id: "a", ts: t0}]});
		out.oldURL = old._wsURL();
		out.oldPos = old.position("x");
		// A room without messages yet: its welcome names no epoch; the
		// reconnect resumes from position 0 of no epoch and the replay of
		// the timeline from its start is taken whole.
		const empty = new DanmakuClient({room: "e", url: "ws://127.0.0.1:9/ws",
			onMessage: (m, meta) => emptyGot.push(m.id + (meta.replay ? "/replay" : ""))});
		const emptyGot = [];
		empty._onFrame({op: "welcome", room: "e", connId: "c5", online: 1, heartbeatMs: 25000, epoch: "", pos: 0});
		out.emptyURL = empty._wsURL();
		empty._onFrame({op: "welcome", room: "e", connId: "c6", online: 1, heartbeatMs: 25000, epoch: "E5", pos: 2, recovered: true});
		empty._onFrame({op: "msgs", room: "e", epoch: "E5", replay: true, msgs: [{id: "e1", pos: 1, ts: t0}, {id: "e2", pos: 2, ts: t0 + 1}]});
		out.emptyPos = empty.position("e");
		out.emptyGot = emptyGot;
		// Positions are kept for a bounded number of rooms, newest kept.
		const many = new DanmakuClient({});
		for (let i = 0; i < 100; i++) many._onFrame({op: "welcome", room: "k" + i, epoch: "E", pos: i});
		out.kept = many.timeline.size;
		out.keptNewest = many.position("k99") !== null && many.position("k0") === null;
		setTimeout(() => { out.got = got; out.batches = batches; resolve(out); }, 1200);
	})`
	type pos struct {
		Epoch string `json:"epoch"`
		Pos   int64  `json:"pos"`
	}
	type gap struct {
		Room, Reason, Epoch, ServerEpoch string
		Pos, ServerPos                   int64
	}
	var res struct {
		FreshURL, ResumeURL, OldURL, EmptyURL                   string
		EmptyPos                                                pos
		EmptyGot                                                []string
		AfterWelcome, AfterLive, AfterRecovered, AfterReplayPos pos
		AfterRefused, AfterNewEpoch, Other                      pos
		OldPos                                                  *pos
		AfterHistory, AfterReplay, Got, Batches                 []string
		Queued, QueuedAfterReplay, Kept                         int
		KeptNewest                                              bool
		Gaps                                                    []gap
		Sent                                                    []map[string]any
	}
	raw := evalTo[json.RawMessage](t, browser, script)
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	check("URL of a first connect", res.FreshURL, "ws://127.0.0.1:9/ws?room=r")
	check("position after the welcome", res.AfterWelcome, pos{"E1", 7})
	check("history replay", res.AfterHistory, []string{"h5/replay", "h6/replay", "h7/replay"})
	check("position after live frames", res.AfterLive, pos{"E1", 9})
	check("live messages waiting to be paced", res.Queued, 1)
	check("URL of a reconnect", res.ResumeURL, "ws://127.0.0.1:9/ws?room=r&since=9&epoch=E1")
	check("position after a recovered welcome (the replay moves it)", res.AfterRecovered, pos{"E1", 9})
	check("messages after the recovery replay", res.AfterReplay,
		[]string{"h5/replay", "h6/replay", "h7/replay", "q8", "q9", "r10/replay", "r11/replay"})
	check("queue after a replay", res.QueuedAfterReplay, 0)
	check("position after the recovery replay", res.AfterReplayPos, pos{"E1", 11})
	check("position after a refused resume", res.AfterRefused, pos{"E2", 3})
	check("position after a new epoch", res.AfterNewEpoch, pos{"E3", 1})
	check("gaps", res.Gaps, []gap{
		{Room: "r", Reason: "resume", Epoch: "E1", Pos: 11, ServerEpoch: "E2", ServerPos: 3},
		{Room: "r", Reason: "epoch", Epoch: "E2", Pos: 3, ServerEpoch: "E3", ServerPos: 1},
	})
	check("join frames", res.Sent, []map[string]any{
		{"op": "join", "room": "other"},
		{"op": "join", "room": "r", "since": 1, "epoch": "E3"},
	})
	check("position of a room left", res.Other, pos{"F1", 4})
	check("URL without timelines", res.OldURL, "ws://127.0.0.1:9/ws?room=x")
	if res.OldPos != nil {
		t.Errorf("position without timelines: %+v", *res.OldPos)
	}
	check("URL of a reconnect to a room that had no messages", res.EmptyURL, "ws://127.0.0.1:9/ws?room=e&since=0&epoch=")
	check("position after resuming a room that had no messages", res.EmptyPos, pos{"E5", 2})
	check("replay of a room that had no messages", res.EmptyGot, []string{"e1/replay", "e2/replay"})
	check("rooms kept", res.Kept, 64)
	check("newest rooms kept", res.KeptNewest, true)
	check("all messages", res.Got,
		[]string{"h5/replay", "h6/replay", "h7/replay", "q8", "q9", "r10/replay", "r11/replay", "n1"})
	check("batches", res.Batches, []string{"r:3:true", "r:2:false", "r:1:false", "r:3:true", "r:1:false"})
}

// TestBrowserPageReplay feeds frames to the demo page's client: replayed
// comments go to the chat log only, live ones to the log and the stage, and
// a gap is said in the log.
func TestBrowserPageReplay(t *testing.T) {
	m := startMain(t)
	browser := newBrowser(t)
	room := "page_replay"
	tab := openPage(t, browser, m.URL(), room, true)
	evalTo[bool](t, tab, `(() => { const c = danmakuDemo.client, t0 = Date.now();
		c._onFrame({op: "msgs", room: "`+room+`", epoch: "E", replay: true, msgs: [
			{id: "rp1", pos: 1, uid: 1, name: "a", content: "replayed one", ts: t0 - 5000},
			{id: "rp2", pos: 2, uid: 2, name: "b", content: "replayed two", ts: t0 - 4000}]});
		c._onFrame({op: "msgs", room: "`+room+`", epoch: "E", msgs: [
			{id: "lv3", pos: 3, uid: 3, name: "c", content: "live three", ts: t0}]});
		c._onFrame({op: "msgs", room: "`+room+`", epoch: "E2", msgs: [
			{id: "lv4", pos: 1, uid: 3, name: "c", content: "after a reset", ts: t0}]});
		return true; })()`)
	poll(t, tab, "live comments on the stage", `document.querySelectorAll("#layer .bullet").length === 2`)
	res := evalTo[map[string]string](t, tab, `(() => {
		const ids = sel => [...document.querySelectorAll(sel)].map(e => e.dataset.id).join(",");
		return {log: ids("#log li[data-id]"), replay: ids("#log li.replay"), stage: ids("#layer .bullet"),
			sys: [...document.querySelectorAll("#log li.sys")].map(e => e.textContent).join("|"),
			count: document.querySelector("#count").textContent}; })()`)
	want := map[string]string{"log": "rp1,rp2,lv3,lv4", "replay": "rp1,rp2", "stage": "lv3,lv4", "count": "4 messages"}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s: %q, want %q", k, res[k], v)
		}
	}
	if !strings.Contains(res["sys"], "history was reset") {
		t.Errorf("the log does not say the history was reset: %q", res["sys"])
	}

	// Leaving the room and coming back puts its chat back.
	evalTo[bool](t, tab, `(danmakuDemo.switchRoom("page_replay_2"), true)`)
	if n := evalTo[int](t, tab, `document.querySelectorAll("#log li[data-id]").length`); n != 0 {
		t.Errorf("%d chat lines of the old room after the switch", n)
	}
	evalTo[bool](t, tab, `(danmakuDemo.switchRoom("`+room+`"), true)`)
	if got := evalTo[string](t, tab, `[...document.querySelectorAll("#log li[data-id]")].map(e => e.dataset.id).join(",")`); got != want["log"] {
		t.Errorf("chat after coming back: %q, want %q", got, want["log"])
	}
}

// waitOnline waits until room has n viewers registered.
func waitOnline(t *testing.T, m *Main, room string, n int64) {
	t.Helper()
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + m.Addr() + "/logic/online?roomId=" + room)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct {
			Online int64 `json:"online"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return err
		}
		if body.Online != n {
			return fmt.Errorf("room %s: %d viewers, want %d", room, body.Online, n)
		}
		return nil
	})
}

// readIDs reads ws's frames until every id of want has arrived in a msgs
// frame: the messages were broadcast.
func readIDs(t *testing.T, ws *wsviewer.Conn, want []string) {
	t.Helper()
	missing := map[string]bool{}
	for _, id := range want {
		missing[id] = true
	}
	end := time.Now().Add(15 * time.Second)
	for len(missing) > 0 {
		f, _, err := ws.Next(time.Until(end))
		if err != nil {
			t.Fatalf("viewer: %d of %d messages missing: %v", len(missing), len(want), err)
		}
		if f.Msgs == nil {
			continue
		}
		for _, m := range f.Msgs.Msgs {
			delete(missing, m.ID)
		}
	}
}

// logOnce is a JavaScript expression: which of ids the chat log lacks, which
// it shows more than once, and which other messages it shows.
func logOnce(ids []string) string {
	b, _ := json.Marshal(ids)
	return `((ids) => { const n = {};
		document.querySelectorAll("#log li[data-id]").forEach(li => n[li.dataset.id] = (n[li.dataset.id] || 0) + 1);
		return {missing: ids.filter(i => !n[i]), dup: Object.keys(n).filter(k => n[k] > 1),
			extra: Object.keys(n).filter(k => !ids.includes(k))}; })(` + string(b) + `)`
}

type logReport struct{ Missing, Dup, Extra []string }

// waitLogOnce waits until the chat log shows every id of ids and then
// requires each exactly once and nothing else.
func waitLogOnce(t *testing.T, tab context.Context, what string, ids []string) {
	t.Helper()
	err := chromedp.Do(tab, chromedp.Poll[chromedp.Void](logOnce(ids)+`.missing.length === 0`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	r := evalTo[logReport](t, tab, logOnce(ids))
	if err != nil || len(r.Dup) > 0 || len(r.Extra) > 0 {
		t.Fatalf("%s: chat log of %d messages: missing %v, twice %v, unexpected %v (%v)",
			what, len(ids), r.Missing, r.Dup, r.Extra, err)
	}
}

// hookPage shortens the page client's backoff (the test cuts the path for
// a moment only) and records its gaps in window.__gaps.
func hookPage(t *testing.T, tab context.Context) {
	t.Helper()
	evalTo[bool](t, tab, `(() => { const c = danmakuDemo.client, orig = c.opts.onGap;
		c.opts.backoffMinMs = 200; c.opts.backoffMaxMs = 800;
		window.__gaps = [];
		c.opts.onGap = g => { __gaps.push(g); orig(g); };
		return true; })()`)
}

// TestBrowserHistoryOnJoin: a page entering a room with earlier messages
// shows them in its chat log, in order and marked as replayed, and not on
// the stage; the next live comment goes to both.
func TestBrowserHistoryOnJoin(t *testing.T) {
	m := startMain(t)
	room := testkit.Uniq("history_")
	viewer := dial(t, m, room)
	waitOnline(t, m, room, 1)
	ids := send(t, m, room, "earlier one", "earlier two", "earlier three")
	readIDs(t, viewer, ids)

	browser := newBrowser(t)
	tab := openPage(t, browser, m.URL(), room, true)
	waitLogOnce(t, tab, "history on entering the room", ids)
	order := evalTo[[]string](t, tab, `[...document.querySelectorAll("#log li[data-id]")].map(e => e.dataset.id)`)
	if !slices.Equal(order, ids) {
		t.Errorf("history in the log as %v, want %v (oldest first)", order, ids)
	}
	if n := evalTo[int](t, tab, `document.querySelectorAll("#log li.replay[data-id]").length`); n != len(ids) {
		t.Errorf("%d of %d history lines marked as replayed", n, len(ids))
	}
	if n := evalTo[int](t, tab, `document.querySelectorAll("#layer .bullet").length`); n != 0 {
		t.Errorf("%d history comments on the stage", n)
	}

	waitOnline(t, m, room, 2)
	live := send(t, m, room, "live after the history")
	waitLogOnce(t, tab, "live after the history", append(ids, live...))
	poll(t, tab, "live comment on the stage", `document.querySelector('#layer .bullet[data-id="`+live[0]+`"]') !== null`)
}

// cutPage is a demo page that reaches the all-in-one server through a
// cutProxy, and a WebSocket viewer of the same room connected directly,
// which tells when a comment has been broadcast.
type cutPage struct {
	m      *Main
	proxy  *cutProxy
	room   string
	viewer *wsviewer.Conn
	tab    context.Context
}

func newCutPage(t *testing.T, roomPrefix string) *cutPage {
	t.Helper()
	p := &cutPage{m: startMain(t), room: testkit.Uniq(roomPrefix)}
	p.proxy = newCutProxy(t, p.m.Addr())
	p.viewer = dial(t, p.m, p.room)
	p.tab = openPage(t, newBrowser(t), p.proxy.URL(), p.room, true)
	hookPage(t, p.tab)
	waitOnline(t, p.m, p.room, 2)
	return p
}

// sendShown sends contents, waits until the page's chat log shows them,
// and returns their ids with the page's position after them.
func (p *cutPage) sendShown(t *testing.T, contents ...string) ([]string, map[string]any) {
	t.Helper()
	ids := send(t, p.m, p.room, contents...)
	readIDs(t, p.viewer, ids)
	waitLogOnce(t, p.tab, "sent while connected", ids)
	return ids, evalTo[map[string]any](t, p.tab, `danmakuDemo.client.position()`)
}

// goDown cuts the page's path and keeps it down until setDown(false).
func (p *cutPage) goDown(t *testing.T) {
	t.Helper()
	p.proxy.setDown(true)
	p.proxy.cut()
	poll(t, p.tab, "page notices the cut", `danmakuDemo.client.state !== "open"`)
}

// cutWhileSending sends a steady stream of comments, each from its own
// user (the rate limit is per user) from uid on, through a cut of the
// page's path, a second's outage and the page's reconnect, and returns the
// ids accepted.
func (p *cutPage) cutWhileSending(t *testing.T, uid int64) []string {
	t.Helper()
	var (
		mu      sync.Mutex
		stream  []string
		sendErr error
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(60 * time.Millisecond):
			}
			got, err := postAs(p.m.Addr(), p.room, uid+int64(i), "stream "+strconv.Itoa(i))
			mu.Lock()
			stream = append(stream, got...)
			if err != nil && sendErr == nil {
				sendErr = err
			}
			mu.Unlock()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	p.goDown(t)
	time.Sleep(time.Second)
	p.proxy.setDown(false)
	poll(t, p.tab, "page reconnects", `danmakuDemo.client.state === "open"`)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	return stream
}

// TestBrowserResumeAfterCut: the network path of a page goes down while
// comments keep being sent. The page reconnects with since/epoch and its
// chat log ends with every comment exactly once: the ones sent while it was
// cut are replayed, and the seam between the replay and live comments has
// no gap and no duplicate.
func TestBrowserResumeAfterCut(t *testing.T) {
	p := newCutPage(t, "resume_")
	m, proxy, room, viewer, tab := p.m, p.proxy, p.room, p.viewer, p.tab
	ids, before := p.sendShown(t, "before the cut 1", "before the cut 2")

	stream := p.cutWhileSending(t, 5000)
	ids = append(ids, stream...)
	readIDs(t, viewer, stream)
	waitLogOnce(t, tab, "after the reconnect", ids)

	// The page connected fresh, then every reconnect resumed in the same
	// epoch from at least where it was before the stream started.
	var wsLines []string
	for _, l := range proxy.requestLines() {
		if strings.HasPrefix(l, "GET /ws?") {
			wsLines = append(wsLines, l)
		}
	}
	resume := regexp.MustCompile(`[?&]since=(\d+)&epoch=([^& ]+)`)
	if len(wsLines) < 2 || strings.Contains(wsLines[0], "since=") {
		t.Errorf("WebSocket requests %q: want a fresh connect, then resumes", wsLines)
	}
	for _, l := range wsLines[min(1, len(wsLines)):] {
		mt := resume.FindStringSubmatch(l)
		if mt == nil {
			t.Errorf("reconnect %q does not resume", l)
			continue
		}
		since, _ := strconv.ParseFloat(mt[1], 64)
		epoch, _ := url.QueryUnescape(mt[2])
		if epoch != before["epoch"] || since < before["pos"].(float64) {
			t.Errorf("reconnect %q resumes from %s in %s; the page was at %v before the cut", l, mt[1], epoch, before)
		}
	}
	if gaps := evalTo[[]map[string]any](t, tab, `__gaps`); len(gaps) > 0 {
		t.Errorf("gaps reported on a recoverable cut: %v", gaps)
	}

	waitOnline(t, m, room, 2)
	after := send(t, m, room, "after the reconnect")
	waitLogOnce(t, tab, "live after the reconnect", append(ids, after...))
}

// TestBrowserGapAfterHistoryLost: the room's history is lost in Redis while
// a page is cut off. Its resume is answered recovered:false: onGap reports
// the epoch and position it asked for and the room's new timeline, the page
// says the room's history was reset, and the comment sent after the loss is
// shown exactly once.
func TestBrowserGapAfterHistoryLost(t *testing.T) {
	p := newCutPage(t, "gap_")
	m, room, tab := p.m, p.room, p.tab
	ids, before := p.sendShown(t, "before the loss")
	p.goDown(t)
	ctx := context.Background()
	keys, err := m.rdb.Keys(ctx, "*"+room+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, k := range keys {
		if strings.Contains(k, "timeline") || strings.Contains(k, "history") {
			lost = append(lost, k)
		}
	}
	if len(lost) == 0 {
		t.Fatalf("no timeline or history key of room %s in Redis (keys %v)", room, keys)
	}
	if err := m.rdb.Del(ctx, lost...).Err(); err != nil {
		t.Fatal(err)
	}
	after := send(t, m, room, "after the loss")
	readIDs(t, p.viewer, after)
	p.proxy.setDown(false)

	poll(t, tab, "onGap", `__gaps.length > 0`)
	gaps := evalTo[[]map[string]any](t, tab, `__gaps`)
	g := gaps[0]
	if len(gaps) != 1 || g["room"] != room || g["reason"] != "resume" || g["epoch"] != before["epoch"] ||
		g["pos"] != before["pos"] || g["serverEpoch"] == before["epoch"] || g["serverEpoch"] == "" {
		t.Errorf("gaps %v; want one resume gap of room %s from %v", gaps, room, before)
	}
	waitLogOnce(t, tab, "after the loss", append(ids, after...))
	// The history was lost (a new epoch): the page says so, not that
	// comments sent while offline were lost.
	if !pageShows(t, tab, "history was reset") || pageShows(t, tab, "could not be recovered") {
		t.Error("the page does not say that the room's history was reset")
	}
}
