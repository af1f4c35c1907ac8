package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
)

// notify posts a notice request with the admin secret and expects 202.
func notify(t *testing.T, m *Main, secret, path, body string) {
	t.Helper()
	adminCall(t, m, secret, path, body, http.StatusAccepted)
}

// recordNotices records the page client's onUser and onBroadcast calls in
// window.__notices as "op:id:content".
func recordNotices(t *testing.T, tab context.Context) {
	t.Helper()
	evalTo[bool](t, tab, `(() => { const c = danmakuDemo.client, u = c.opts.onUser, b = c.opts.onBroadcast;
		window.__notices = [];
		c.opts.onUser = ms => { ms.forEach(n => __notices.push("user:" + n.id + ":" + (n.content || JSON.stringify(n.data)))); u(ms); };
		c.opts.onBroadcast = ms => { ms.forEach(n => __notices.push("all:" + n.id + ":" + (n.content || JSON.stringify(n.data)))); b(ms); };
		return true; })()`)
}

// bannerShows is a JavaScript predicate: the page's banner is up with a
// notice of kind ("user" or "all") and text.
func bannerShows(kind, text string) string {
	return `(() => { const b = document.querySelector("#banner"); return !b.hidden && b.dataset.kind === ` +
		strconv.Quote(kind) + ` && document.querySelector("#banner-text").textContent === ` + strconv.Quote(text) + `; })()`
}

// TestBrowserNotices: a push to a user reaches that user's page (proven by
// its token), in its
// room, as a banner and through onUser, and not a page of another user in
// another room; a broadcast reaches both pages through onBroadcast and
// shows as a banner; each notice is handed over once.
func TestBrowserNotices(t *testing.T) {
	const secret = "browser-admin-secret-0123456789"
	// User notices go to users a token proved: the pages get theirs from
	// /dev/token, which the all-in-one serves with auth on and no keys.
	m := startMain(t, func(c *Config) {
		c.Logic.AdminSecret = secret
		c.Logic.Auth, c.Comet.Auth = config.AuthJWT, config.AuthJWT
	})
	browser := newBrowser(t)
	a := openPage(t, browser, m.URL(), testkit.Uniq("notice_a_"), true)
	b := openPage(t, browser, m.URL(), testkit.Uniq("notice_b_"), false)
	recordNotices(t, a)
	recordNotices(t, b)
	uidA, uidB := evalTo[int64](t, a, `danmakuDemo.userId`), evalTo[int64](t, b, `danmakuDemo.userId`)
	if uidA == uidB {
		t.Fatalf("both pages are user %d", uidA)
	}
	notify(t, m, secret, "/logic/push/user", `{"userId":`+strconv.FormatInt(uidA, 10)+
		`,"messages":[{"content":"your gift arrived","data":{"gift":"rose"},"msgId":"g1"}]}`)
	poll(t, a, "the user banner", bannerShows("user", "your gift arrived"))
	waitShows(t, a, "the user's page", "for you: your gift arrived")

	notify(t, m, secret, "/logic/broadcast", `{"messages":[{"content":"maintenance at 3:00","msgId":"b1"}]}`)
	for _, tab := range []context.Context{a, b} {
		waitShows(t, tab, "a page", "announcement: maintenance at 3:00")
	}
	poll(t, b, "the broadcast banner", bannerShows("all", "maintenance at 3:00"))
	want := map[context.Context][]string{
		a: {"user:to" + strconv.FormatInt(uidA, 10) + "-g1:your gift arrived", "all:all-b1:maintenance at 3:00"},
		b: {"all:all-b1:maintenance at 3:00"},
	}
	for tab, w := range want {
		if got := evalTo[[]string](t, tab, `__notices`); strings.Join(got, "|") != strings.Join(w, "|") {
			t.Fatalf("notices handed to the page: %v, want %v", got, w)
		}
	}
}
