package main

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/wordfilter"
)

// TestConsoleReview: with review on (set in the console), a comment with a
// blocked word is held: no viewer gets it and the console's Review tab
// lists it with the word; approved there with one click it appears at
// every viewer; one rejected never does. With DANMAKU_SCREENSHOTS set it
// saves console-review.png there.
func TestConsoleReview(t *testing.T) {
	addr := redisserver.Standalone(t).Addr
	m := startMain(t, func(c *Config) {
		c.Logic.AdminSecret = consoleSecret
		c.Redis.Addrs = []string{addr}
		c.Logic.BlockedWords = wordfilter.Config{Mode: wordfilter.ModeReject, Words: []string{"spoiler"}}
	})
	browser := newBrowser(t)
	room := testkit.Uniq("console_review_")
	a := openPage(t, browser, m.URL(), room, true)
	b := openPage(t, browser, m.URL(), room, false)
	mod := openConsole(t, browser, m, consoleSecret, room, false)

	evalTo[bool](t, mod, `(() => { document.querySelector("#set-review").checked = true;
		document.querySelector("#settings-form").requestSubmit(); return true; })()`)
	poll(t, mod, "review mode on", `document.querySelector('#modes .mode[data-mode="review"]')`)

	sendFromPage(t, a, "a spoiler: the butler did it")
	sendFromPage(t, a, "another spoiler to reject")
	click(t, mod, `[data-tab="review"]`)
	const items = `[...document.querySelectorAll("#review-list li")]`
	poll(t, mod, "both held comments in the review queue", items+`.length === 2 && `+items+`.every(li => li.querySelector(".word").textContent === "spoiler")`)
	if os.Getenv("DANMAKU_SCREENSHOTS") != "" {
		poll(t, mod, "the notices gone", `!document.querySelector("#toasts").children.length`)
		screenshot(t, mod, "console-review", 1366, 768)
	}
	sendFromPage(t, b, "an ordinary comment")
	for _, tab := range []context.Context{a, b} {
		waitShows(t, tab, "the ordinary comment", "an ordinary comment")
		if pageShows(t, tab, "the butler did it") || pageShows(t, tab, "to reject") {
			t.Fatal("a held comment reached a viewer before it was approved")
		}
	}
	decide(t, mod, "a spoiler: the butler did it", "approve")
	for _, tab := range []context.Context{a, b} {
		waitShows(t, tab, "the approved comment", "a spoiler: the butler did it")
	}
	poll(t, mod, "the approved comment in the live view", `[...document.querySelectorAll("#feed .text")].some(e => e.textContent === "a spoiler: the butler did it")`)
	poll(t, mod, "one left in the queue", items+`.length === 1`)
	decide(t, mod, "another spoiler to reject", "reject")
	poll(t, mod, "the queue empty", items+`.length === 0 && !document.querySelector("#review-empty").hidden`)
	time.Sleep(time.Second)
	for _, tab := range []context.Context{a, b} {
		if pageShows(t, tab, "to reject") {
			t.Fatal("a rejected comment reached a viewer")
		}
	}
}

// decide clicks approve or reject on the review item of text.
func decide(t *testing.T, tab context.Context, text, act string) {
	t.Helper()
	if !evalTo[bool](t, tab, `(() => { const li = [...document.querySelectorAll("#review-list li")].find(li =>
		li.querySelector(".text").textContent === `+strconv.Quote(text)+`);
		const b = li && li.querySelector('button[data-act="`+act+`"]'); if (b) b.click(); return !!b; })()`) {
		t.Fatalf("no review item %q to %s", text, act)
	}
}
