package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

const consoleSecret = "console-admin-secret-0123456789"

// startConsoleMain runs the all-in-one binary (its comet, job and logic)
// over the real redis-server and the embedded Kafka broker, with an admin
// secret for the console.
func startConsoleMain(t *testing.T) *Main {
	t.Helper()
	addr := redisserver.Standalone(t).Addr
	return startMain(t, func(c *Config) {
		c.Logic.AdminSecret = consoleSecret
		c.Redis.Addrs = []string{addr}
	})
}

// openConsole opens the console of m in a new tab of browser (the first
// tab when first), signs in with credential as a moderator would (typing
// it into the form) and opens room from the room form; it returns once the
// live view of the room is open.
func openConsole(t *testing.T, browser context.Context, m *Main, credential, room string, first bool) context.Context {
	t.Helper()
	tab := newTab(t, browser, first)
	if err := chromedp.Do(tab, chromedp.Navigate(m.URL()+"admin/")); err != nil {
		t.Fatal(err)
	}
	poll(t, tab, "the sign-in form", `!document.querySelector("#signin").hidden`)
	evalTo[bool](t, tab, `(() => { document.querySelector("#credential").value = `+strconv.Quote(credential)+`;
		document.querySelector("#signin-form").requestSubmit(); return true; })()`)
	poll(t, tab, "the console after signing in", `!document.querySelector("#app").hidden`)
	evalTo[bool](t, tab, `(() => { document.querySelector("#open-room-id").value = `+strconv.Quote(room)+`;
		document.querySelector("#open-room").requestSubmit(); return true; })()`)
	poll(t, tab, "the live view of the room", `danmakuConsole.room === `+strconv.Quote(room)+
		` && danmakuConsole.client.state === "open" && danmakuConsole.client.joined === `+strconv.Quote(room))
	return tab
}

// inFeed is a JavaScript expression: the console's line of comment id, or null.
func inFeed(id string) string {
	return `document.querySelector('#feed li[data-id=` + strconv.Quote(id) + `]')`
}

// click clicks the element of selector in tab (it must exist).
func click(t *testing.T, tab context.Context, selector string) {
	t.Helper()
	if !evalTo[bool](t, tab, `(() => { const e = document.querySelector(`+strconv.Quote(selector)+`);
		if (!e || e.disabled) return false; e.click(); return true; })()`) {
		t.Fatalf("nothing to click at %s", selector)
	}
}

// screenshot saves tab as docs/<name>.png-like file in $DANMAKU_SCREENSHOTS
// at the given viewport, when that variable names a directory.
func screenshot(t *testing.T, tab context.Context, name string, width, height int64) {
	t.Helper()
	dir := os.Getenv("DANMAKU_SCREENSHOTS")
	if dir == "" {
		return
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleDelete: a moderator signed in with the admin secret deletes a
// comment with one click in the console's live view; both viewer pages of
// the room lose it, keep the other, and the console marks it deleted and
// lists the action in the audit log.
func TestConsoleDelete(t *testing.T) {
	m := startConsoleMain(t)
	browser := newBrowser(t)
	room := testkit.Uniq("console_del_")
	a := openPage(t, browser, m.URL(), room, true)
	b := openPage(t, browser, m.URL(), room, false)
	mod := openConsole(t, browser, m, consoleSecret, room, false)

	ids := send(t, m, room, "keep this one", "delete this one")
	for _, tab := range []context.Context{a, b} {
		waitLogOnce(t, tab, "before the delete", ids)
	}
	poll(t, mod, "the comments in the console", inFeed(ids[0])+` && `+inFeed(ids[1]))
	click(t, mod, `#feed li[data-id="`+ids[1]+`"] button[data-act="delete"]`)
	for name, tab := range map[string]context.Context{"A": a, "B": b} {
		poll(t, tab, "viewer "+name+" loses the deleted comment", `!(`+shows("delete this one")+`)`)
		if !pageShows(t, tab, "keep this one") {
			t.Fatalf("viewer %s lost the comment that was kept", name)
		}
	}
	poll(t, mod, "the console marks the comment deleted", inFeed(ids[1])+`.classList.contains("deleted") && !`+inFeed(ids[0])+`.classList.contains("deleted")`)

	click(t, mod, `[data-tab="audit"]`)
	poll(t, mod, "the delete in the audit log", `[...document.querySelectorAll("#audit-list .entry")].some(e =>
		e.querySelector(".action").textContent === "delete" && e.querySelector(".actor").textContent === "unnamed")`)
}

// TestConsoleSlowMode: slow mode and a chat delay set in the console's
// settings reach the room (the console and the viewer's page show them);
// the viewer's comment reaches the console after the delay, and its second
// comment within the interval is refused, the page saying why.
func TestConsoleSlowMode(t *testing.T) {
	m := startConsoleMain(t)
	browser := newBrowser(t)
	room := testkit.Uniq("console_slow_")
	viewer := openPage(t, browser, m.URL(), room, true)
	mod := openConsole(t, browser, m, consoleSecret, room, false)

	evalTo[bool](t, mod, `(() => { document.querySelector("#set-slow").value = "30"; document.querySelector("#set-delay").value = "2";
		document.querySelector("#settings-form").requestSubmit(); return true; })()`)
	poll(t, mod, "the console shows the modes", `[...document.querySelectorAll("#modes .mode")].map(e => e.textContent).join("|") === "slow 30 s|delay 2 s"`)
	poll(t, viewer, "the page shows slow mode", `[...document.querySelectorAll("#modes .mode")].some(e => e.textContent.includes("30 s"))`)

	sent := time.Now()
	sendFromPage(t, viewer, "first within the interval")
	poll(t, mod, "the console gets the first comment", `[...document.querySelectorAll("#feed .text")].some(e => e.textContent === "first within the interval")`)
	if d := time.Since(sent); d < 1500*time.Millisecond {
		t.Fatalf("the comment reached the console %v after it was sent, within the 2 s delay", d)
	}
	waitShows(t, viewer, "the viewer's first comment", "first within the interval")
	sendFromPage(t, viewer, "second within the interval")
	poll(t, viewer, "the page explains the refusal", `document.querySelector("#hint").textContent.startsWith("Slow mode is on")`)
	if pageShows(t, viewer, "second within the interval") {
		t.Fatal("the second comment within the slow-mode interval was shown")
	}
	if got := evalTo[string](t, mod, `document.querySelector("#settings-ver").textContent`); !strings.HasPrefix(got, "version ") {
		t.Fatalf("settings version %q", got)
	}
}

// TestConsoleEscapes: a user name and a comment made of markup are shown
// as text in the console's live view and in its pin, and run nothing.
func TestConsoleEscapes(t *testing.T) {
	m := startConsoleMain(t)
	browser := newBrowser(t)
	room := testkit.Uniq("console_xss_")
	mod := openConsole(t, browser, m, consoleSecret, room, true)
	evalTo[bool](t, mod, `(window.__pwned = 0, true)`)
	const content = `<img src=x onerror="window.__pwned=1"><b>bold</b><script>window.__pwned=2</script>`
	const name = `<i onclick="x()">eve</i>`
	ids, err := stack.Post("http://"+m.Addr(), room, 666, name, []string{content})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, mod, "the comment in the console", inFeed(ids[0]))
	click(t, mod, `#feed li[data-id="`+ids[0]+`"] button[data-act="pin"]`)
	poll(t, mod, "the pin", `!document.querySelector("#pin").hidden`)
	got := evalTo[map[string]any](t, mod, `(() => { const li = `+inFeed(ids[0])+`;
		return {text: li.querySelector(".text").textContent, name: li.querySelector(".name").textContent,
			pin: document.querySelector("#pin-text").textContent, pinName: document.querySelector("#pin-name").textContent,
			elements: document.querySelectorAll("#feed img, #feed b, #feed i, #feed script, #pin img, #pin b, #pin i").length,
			pwned: window.__pwned}; })()`)
	if got["text"] != content || got["name"] != name || got["pin"] != content || got["pinName"] != name {
		t.Fatalf("shown as %v, want the text as sent", got)
	}
	if got["elements"] != float64(0) || got["pwned"] != float64(0) {
		t.Fatalf("markup of a comment became elements or ran: %v", got)
	}
}

// TestConsoleLayout: the console fits a laptop (1366x768) and a tablet
// (768x1024) without scrolling sideways, the rooms list, the live view with
// its one-click actions and the panel all on screen, with a room as a
// moderator sees it: viewers, comments of several users, modes, a pin and
// sanctions. With DANMAKU_SCREENSHOTS set it saves console-laptop.png and
// console-tablet.png there (docs/console.md shows them).
func TestConsoleLayout(t *testing.T) {
	m := startConsoleMain(t)
	browser := newBrowser(t)
	room, music, sports := testkit.Uniq("lobby_"), testkit.Uniq("music_"), testkit.Uniq("sports_")
	for room, n := range map[string]int{room: 4, music: 2, sports: 1} {
		for range n {
			dial(t, m, room)
		}
	}
	mod := openConsole(t, browser, m, consoleSecret, room, true)
	chat := []struct {
		uid  int64
		name string
		text string
	}{
		{101, "Mika", "first!"}, {102, "dan_the_man", "that clutch was insane"}, {103, "yoru_neko", "here it comes!!!"},
		{104, "Ana", "is the stream lagging for anyone?"}, {105, "noodle", "GG"},
		{106, "spam_bot_77", "FREE COINS at totally-legit.example, click now!!!"},
		{107, "ryo", "clip it! that was the play of the day"}, {108, "Lena", "hello from Berlin"},
	}
	var spam string
	for i, c := range chat {
		ids, err := stack.Post("http://"+m.Addr(), room, c.uid, c.name, []string{c.text})
		if err != nil {
			t.Fatal(err)
		}
		if c.uid == 106 {
			spam = ids[0]
		}
		if i == 3 {
			send(t, m, music, "this track!")
		}
	}
	poll(t, mod, "comments in the console", `document.querySelectorAll("#feed li").length >= `+strconv.Itoa(len(chat)))
	adminPost(t, m, consoleSecret, "/logic/admin/room", `{"roomId":"`+room+`","slowSeconds":10,"uniqueSeconds":30}`)
	adminPost(t, m, consoleSecret, "/logic/admin/pin", `{"roomId":"`+room+`","content":"Welcome! Be kind in chat, moderators are watching.","duration":"30m"}`)
	click(t, mod, `#feed li[data-id="`+spam+`"] button[data-act="ban"]`)
	click(t, mod, `#feed li[data-id="`+spam+`"] button[data-act="delete"]`)
	poll(t, mod, "the modes, the pin and the deleted spam", `document.querySelectorAll("#modes .mode:not(.off)").length === 2 &&
		!document.querySelector("#pin").hidden && `+inFeed(spam)+`.classList.contains("deleted")`)
	poll(t, mod, "the rooms with their rates", `document.querySelectorAll("#room-list .room").length >= 3 &&
		![...document.querySelectorAll("#room-list .room .num")].some(e => e.textContent === "…")`)
	for _, tc := range []struct {
		name          string
		width, height int64
		tab           string
	}{{"laptop", 1366, 768, "settings"}, {"tablet", 768, 1024, "sanctions"}} {
		if err := chromedp.Do(mod, chromedp.EmulateViewport(tc.width, tc.height)); err != nil {
			t.Fatal(err)
		}
		click(t, mod, `[data-tab="`+tc.tab+`"]`)
		if tc.tab == "sanctions" {
			poll(t, mod, "the ban in the sanctions", `document.querySelector('#list-bans li[data-user="106"]')`)
		}
		got := evalTo[map[string]float64](t, mod, `(() => {
			const r = s => document.querySelector(s).getBoundingClientRect();
			const on = s => { const b = r(s); return b.width > 0 && b.height > 0 && b.right <= innerWidth + 1 && b.bottom <= innerHeight + 1 ? 1 : 0; };
			return {rooms: on(".rooms"), feed: on("#feed"), panel: on(".panel"), acts: on("#feed li .acts"),
				overflow: document.documentElement.scrollWidth - innerWidth}; })()`)
		if got["rooms"] != 1 || got["feed"] != 1 || got["panel"] != 1 || got["acts"] != 1 || got["overflow"] > 0 {
			t.Errorf("%s: %v", tc.name, got)
		}
		if os.Getenv("DANMAKU_SCREENSHOTS") != "" {
			poll(t, mod, "the notices gone", `!document.querySelector("#toasts").children.length`)
		}
		screenshot(t, mod, "console-"+tc.name, tc.width, tc.height)
	}
}

// TestConsoleModeratorToken: with tokens at both doors, a moderator signs
// in with its token: the console lists the rooms of its token, opens the
// live view with it, mutes a user with one click (the user's next send is
// refused), lists the mute under Sanctions and lifts it; the blocked words'
// reload is refused to it with an explanation. A viewer's token without the
// moderator role does not sign in.
func TestConsoleModeratorToken(t *testing.T) {
	const hmac = "console-hmac-secret-0123456789abcdef"
	addr := redisserver.Standalone(t).Addr
	m := startMain(t, func(c *Config) {
		c.Logic.AdminSecret = consoleSecret
		c.Redis.Addrs = []string{addr}
		c.Logic.Auth, c.Comet.Auth = config.AuthJWT, config.AuthJWT
		c.Auth.HMACSecret = hmac
	})
	room := testkit.Uniq("console_mod_")
	mint := func(uid int64, name string, roles ...string) string {
		tok, err := auth.Mint([]byte(hmac), auth.Claims{UID: uid, Name: name, Rooms: []string{room}, Roles: roles,
			ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(m.URL()+"admin/")); err != nil {
		t.Fatal(err)
	}
	evalTo[bool](t, browser, `(() => { document.querySelector("#credential").value = `+strconv.Quote(mint(7, "viewer"))+`;
		document.querySelector("#signin-form").requestSubmit(); return true; })()`)
	poll(t, browser, "a viewer's token refused", `document.querySelector("#signin-error").textContent.includes("refused") && document.querySelector("#app").hidden`)
	if got := evalTo[string](t, browser, `sessionStorage.getItem("danmaku.console.auth") || ""`); got != "" {
		t.Fatalf("a refused credential was kept: %q", got)
	}

	modToken := mint(9, "Ann", auth.RoleModerator)
	mod := openConsole(t, browser, m, modToken, room, false)
	if got := evalTo[string](t, mod, `document.querySelector("#who").textContent`); got != "moderator Ann: "+room {
		t.Fatalf("signed in as %q", got)
	}
	poll(t, mod, "the token's room in the rooms list", `document.querySelector('#room-list .room[data-room="`+room+`"]')`)
	if got := evalTo[string](t, mod, `location.href + document.cookie + localStorage.getItem("danmaku.console.auth")`); strings.Contains(got, modToken) {
		t.Fatalf("the token is in the address, a cookie or localStorage: %q", got)
	}

	user := mint(4711, "troll")
	post := func(content string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, m.URL()+"logic/send", strings.NewReader(`{"roomId":"`+room+`","messages":[{"content":"`+content+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+user)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("annoying"); st != http.StatusAccepted {
		t.Fatalf("send: %d", st)
	}
	poll(t, mod, "the comment in the live view", `[...document.querySelectorAll("#feed li")].some(li => li.dataset.uid === "4711")`)
	click(t, mod, `#feed li[data-uid="4711"] button[data-act="mute"]`)
	poll(t, mod, "the mute's notice", `[...document.querySelectorAll("#toasts .toast")].some(e => e.textContent.startsWith("muted troll #4711"))`)
	if st := post("still here"); st != http.StatusForbidden {
		t.Fatalf("send of the muted user: %d, want 403", st)
	}
	click(t, mod, `[data-tab="sanctions"]`)
	poll(t, mod, "the mute under Sanctions", `document.querySelector('#list-mutes li[data-user="4711"]')`)
	click(t, mod, `#list-mutes li[data-user="4711"] button[data-act="unmute"]`)
	poll(t, mod, "the mute lifted", `!document.querySelector('#list-mutes li[data-user="4711"]')`)
	if st := post("back again"); st != http.StatusAccepted {
		t.Fatalf("send after the mute was lifted: %d", st)
	}
	click(t, mod, `[data-tab="words"]`)
	click(t, mod, `#words-reload`)
	poll(t, mod, "the reload refused with a reason", `document.querySelector("#words-result").textContent === "Only the admin secret reloads the blocked words."`)
}
