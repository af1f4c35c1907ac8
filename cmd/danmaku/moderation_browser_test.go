package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
)

// adminPost calls the admin API of m with secret and expects 200.
func adminPost(t *testing.T, m *Main, secret, path, body string) {
	t.Helper()
	adminCall(t, m, secret, path, body, http.StatusOK)
}

// adminCall calls the admin API of m with secret and expects status want.
func adminCall(t *testing.T, m *Main, secret, path, body string, want int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+m.Addr()+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
}

// recordPage records the page client's onDelete calls in window.__dels and
// its gaps in window.__gaps.
func recordPage(t *testing.T, tab context.Context) {
	t.Helper()
	evalTo[bool](t, tab, `(() => { const c = danmakuDemo.client, d = c.opts.onDelete, g = c.opts.onGap;
		window.__dels = []; window.__gaps = [];
		c.opts.onDelete = (ids, room) => { __dels.push(ids.join(",") + "@" + room); d(ids, room); };
		c.opts.onGap = x => { __gaps.push(x); g(x); };
		return true; })()`)
}

// onStage is a JavaScript predicate: the stage flies the comment id.
func onStage(id string) string {
	return `[...document.querySelectorAll("#layer .bullet")].some(e => e.dataset.id === "` + id + `")`
}

// TestBrowserDelete: a comment a moderator deletes leaves the chat log and
// the stage of every page of the room, and danmaku.js calls onDelete with
// its id; a page that was in another room while it was sent and deleted
// comes back (a resume) without it and without a gap; a page opened
// afterwards does not get it in the room's history.
func TestBrowserDelete(t *testing.T) {
	const secret = "browser-admin-secret-0123456789"
	m := startMain(t, func(c *Config) { c.Logic.AdminSecret = secret })
	browser := newBrowser(t)
	room := testkit.Uniq("delete_")
	a := openPage(t, browser, m.URL(), room, true)
	b := openPage(t, browser, m.URL(), room, false)
	away := openPage(t, browser, m.URL(), room, false)
	for _, tab := range []context.Context{a, b, away} {
		recordPage(t, tab)
	}
	first := send(t, m, room, "before leaving")
	for _, tab := range []context.Context{a, b, away} {
		waitLogOnce(t, tab, "the first comment", first)
	}
	evalTo[bool](t, away, `(danmakuDemo.switchRoom("`+room+`_x"), true)`)
	poll(t, away, "the page in the other room", `danmakuDemo.client.state === "open" && danmakuDemo.client.joined === "`+room+`_x"`)

	ids := send(t, m, room, "keep me", "delete me")
	for _, tab := range []context.Context{a, b} {
		waitLogOnce(t, tab, "before the delete", append(first, ids...))
		poll(t, tab, "the comment on the stage", onStage(ids[1]))
	}
	adminPost(t, m, secret, "/logic/admin/delete", `{"roomId":"`+room+`","ids":["`+ids[1]+`"],"actor":"browser-test"}`)
	kept := []string{first[0], ids[0]}
	for _, tab := range []context.Context{a, b} {
		poll(t, tab, "the deleted comment gone from the log and the stage", `!(`+shows("delete me")+`) && !(`+onStage(ids[1])+`)`)
		waitLogOnce(t, tab, "after the delete", kept)
		if got := evalTo[[]string](t, tab, `__dels`); len(got) != 1 || got[0] != ids[1]+"@"+room {
			t.Fatalf("onDelete calls %v", got)
		}
	}

	evalTo[bool](t, away, `(danmakuDemo.switchRoom("`+room+`"), true)`)
	waitLogOnce(t, away, "back in the room", kept)
	if pageShows(t, away, "delete me") {
		t.Fatal("the page that came back shows the deleted comment")
	}
	if n := evalTo[int](t, away, `__gaps.length`); n != 0 {
		t.Fatalf("the page that came back reported %d gaps", n)
	}
	late := openPage(t, browser, m.URL(), room, false)
	waitLogOnce(t, late, "history of a page opened after the delete", kept)
}

// TestBrowserBanned: a page whose user is banned from its room is closed
// with 4003, says so, and does not reconnect; switching to another room
// connects again.
func TestBrowserBanned(t *testing.T) {
	const secret = "browser-admin-secret-0123456789"
	m := startMain(t, func(c *Config) { c.Logic.AdminSecret = secret })
	room := testkit.Uniq("banned_")
	tab := openPage(t, newBrowser(t), m.URL(), room, true)
	uid := evalTo[int64](t, tab, `danmakuDemo.userId`)
	adminPost(t, m, secret, "/logic/admin/ban", `{"userId":`+strconv.FormatInt(uid, 10)+`,"roomId":"`+room+`","duration":"1h"}`)
	poll(t, tab, "the page closed as banned", `danmakuDemo.client.state === "closed" &&
		document.querySelector("#conn-text").textContent === "banned from #`+room+`"`)
	time.Sleep(1500 * time.Millisecond) // longer than the first reconnect's backoff
	if st := evalTo[string](t, tab, `danmakuDemo.client.state + " " + !!danmakuDemo.client.ws`); st != "closed false" {
		t.Fatalf("after the ban the client is %s, want closed without a socket", st)
	}
	evalTo[bool](t, tab, `(danmakuDemo.switchRoom("`+room+`_other"), true)`)
	poll(t, tab, "the page in another room", `danmakuDemo.client.state === "open" && danmakuDemo.client.joined === "`+room+`_other"`)
}
