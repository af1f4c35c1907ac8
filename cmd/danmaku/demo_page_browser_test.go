package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
)

// The red "cannot reach the server" hint goes once the connection is open
// again.
func TestBrowserHintClearsOnReconnect(t *testing.T) {
	m := startMain(t)
	tab := openPage(t, newBrowser(t), m.URL(), "hint_clears", true)
	def := evalTo[string](t, tab, `document.querySelector("#hint").textContent`)
	evalTo[bool](t, tab, `(() => { const c = danmakuDemo.client; window.__api = c.opts.baseUrl;
		c.opts.baseUrl = "`+closedURL(t)+`"; return danmakuDemo.post("x").then(() => true, () => true); })()`)
	if h := evalTo[string](t, tab, `document.querySelector("#hint").textContent`); !strings.HasPrefix(h, "cannot reach the server") {
		t.Fatalf("hint while the server is unreachable: %q", h)
	}
	// The server is back: the socket reconnects.
	evalTo[bool](t, tab, `(() => { const c = danmakuDemo.client; c.opts.baseUrl = __api; c.ws.close(4000, "test drop"); return true; })()`)
	poll(t, tab, "reconnected", `danmakuDemo.client.state === "reconnecting" || danmakuDemo.client.state === "connecting"`)
	poll(t, tab, "hint cleared after reconnecting", `danmakuDemo.client.state === "open" &&
		document.querySelector("#hint").textContent === `+jsString(def)+` && !document.querySelector("#hint").classList.contains("error")`)
}

func jsString(s string) string { return "`" + strings.ReplaceAll(s, "`", "\\`") + "`" }

// Below 900 px the room switcher stays (a row of its own) and the comment
// field gets a whole row; at full width the composer is one row. The
// screenshots go to DANMAKU_SCREENSHOTS when it names a directory.
func TestBrowserNarrowAndWide(t *testing.T) {
	m := startMain(t)
	tab := openPage(t, newBrowser(t), m.URL(), "layout", true)
	for _, tc := range []struct {
		name          string
		width, height int64
	}{{"narrow", 600, 900}, {"phone", 390, 844}, {"wide", 1280, 800}} {
		if err := chromedp.Do(tab, chromedp.EmulateViewport(tc.width, tc.height)); err != nil {
			t.Fatal(err)
		}
		got := evalTo[map[string]float64](t, tab, `(() => {
			const r = s => document.querySelector(s).getBoundingClientRect();
			const vis = s => { const e = document.querySelector(s); return e.offsetParent !== null && r(s).width > 0 ? 1 : 0; };
			return {rooms: vis("#rooms"), form: vis("#room-form"), chips: document.querySelectorAll("#rooms .chip").length,
				text: r("#text").width, composer: r("#composer").width, textTop: r("#text").top, nameTop: r("#name").top,
				overflow: document.documentElement.scrollWidth - window.innerWidth}; })()`)
		if got["rooms"] != 1 || got["form"] != 1 || got["chips"] < 4 {
			t.Errorf("%s: room switcher %v", tc.name, got)
		}
		if got["overflow"] > 0 {
			t.Errorf("%s: the page is %v px wider than the window", tc.name, got["overflow"])
		}
		if tc.width < 900 && got["text"] < 0.9*got["composer"] {
			t.Errorf("%s: comment field %v px of a %v px composer", tc.name, got["text"], got["composer"])
		}
		if tc.width >= 900 && got["textTop"] != got["nameTop"] {
			t.Errorf("%s: composer not on one row: %v", tc.name, got)
		}
		if dir := os.Getenv("DANMAKU_SCREENSHOTS"); dir != "" {
			png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "demo-"+tc.name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// With comet.auth jwt and no token source (a configured secret: no
// development endpoint) the page stops reconnecting and says why; with
// #token= it connects.
func TestBrowserSaysWhyNoToken(t *testing.T) {
	secret := strings.Repeat("k", 32)
	m := startMain(t, func(c *Config) { c.Comet.Auth, c.Auth.HMACSecret = config.AuthJWT, secret })
	browser := newBrowser(t)
	err := chromedp.Do(browser, chromedp.Navigate(m.URL()+"?room=no_token"))
	if err != nil {
		t.Fatal(err)
	}
	poll(t, browser, "the page says a token is needed", `document.querySelector("#hint").textContent.includes("requires a sign-in token") &&
		document.querySelector("#conn-text").textContent === "not signed in" && !danmakuDemo.client.wanted`)
	tok, err := auth.Mint([]byte(secret), auth.Claims{UID: 42, Name: "t", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tab, cancel := chromedp.NewContext(browser)
	defer cancel()
	if err := chromedp.Do(tab, chromedp.Navigate(m.URL()+"?room=no_token#token="+tok)); err != nil {
		t.Fatal(err)
	}
	poll(t, tab, "the page with a token connects", `danmakuDemo.client.state === "open"`)
	bad, cancel2 := chromedp.NewContext(browser)
	defer cancel2()
	if err := chromedp.Do(bad, chromedp.Navigate(m.URL()+"?room=no_token#token=x.y.z")); err != nil {
		t.Fatal(err)
	}
	poll(t, bad, "a bad token is named", `document.querySelector("#hint").textContent.includes("refused this page's token") && !danmakuDemo.client.wanted`)
}

// After a restart that lost the room's history the page says the history
// was reset, not that comments sent while offline were lost.
func TestBrowserHistoryResetAfterRestart(t *testing.T) {
	m := startMain(t)
	room := "reset_room"
	tab := openPage(t, newBrowser(t), m.URL(), room, true)
	sendFromPage(t, tab, "before the restart")
	waitShows(t, tab, "page", "before the restart")
	addr := m.Addr()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	startMain(t, func(c *Config) { c.Logic.Listen = addr }) // empty embedded Redis and Kafka
	poll(t, tab, "reconnected after the restart", `danmakuDemo.client.state === "open" &&
		[...document.querySelectorAll("#log li.sys")].some(e => /history was reset|could not be recovered/.test(e.textContent))`)
	sys := evalTo[string](t, tab, `[...document.querySelectorAll("#log li.sys")].map(e => e.textContent).join("|")`)
	if !strings.Contains(sys, "history was reset") || strings.Contains(sys, "could not be recovered") {
		t.Fatalf("after a restart that lost the history the page says: %s", sys)
	}
}

// Names on the flying comments can be turned off, and stay off.
func TestBrowserNamesToggle(t *testing.T) {
	m := startMain(t)
	room := "names_toggle"
	tab := openPage(t, newBrowser(t), m.URL(), room, true)
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("label:has(#names-toggle)"))); err != nil {
		t.Fatal(err)
	}
	sendFromPage(t, tab, "no name on me")
	poll(t, tab, "flying comment", `[...document.querySelectorAll("#layer .bullet")].some(e => e.textContent.includes("no name on me"))`)
	shown := evalTo[map[string]string](t, tab, `(() => { const b = [...document.querySelectorAll("#layer .bullet")].find(e => e.textContent.includes("no name on me"));
		return {stage: getComputedStyle(b.querySelector(".who")).display,
			log: getComputedStyle([...document.querySelectorAll("#log li .who")].pop()).display}; })()`)
	if shown["stage"] != "none" || shown["log"] == "none" {
		t.Fatalf("names off: stage %q, chat log %q", shown["stage"], shown["log"])
	}
	if err := chromedp.Do(tab, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	poll(t, tab, "still off after a reload", `!document.querySelector("#names-toggle").checked &&
		document.querySelector("#layer").classList.contains("no-names")`)
}
