package main

import (
	"testing"

	"github.com/danmaku/danmaku/internal/testkit"
)

// TestBrowserDemoModes: the demo page shows the room's modes and its pin
// as the admin API changes them, live and in the welcome of a page opened
// later, and explains a slow-mode refusal with the countdown on its Send
// button.
func TestBrowserDemoModes(t *testing.T) {
	const secret = "browser-admin-secret-0123456789"
	m := startMain(t, func(c *Config) { c.Logic.AdminSecret = secret })
	browser := newBrowser(t)
	room := testkit.Uniq("modes_")
	tab := openPage(t, browser, m.URL(), room, true)
	poll(t, tab, "no modes shown", `document.querySelector("#modes").hidden && document.querySelector("#pinned").hidden`)

	adminPost(t, m, secret, "/logic/admin/room", `{"roomId":"`+room+`","slowSeconds":20,"uniqueSeconds":60}`)
	const modes = `[...document.querySelectorAll("#modes .mode")].map(e => e.textContent).join("|")`
	poll(t, tab, "the modes on the page", modes+` === "Slow mode · 1 comment / 20 s|Unique chat · 60 s" && !document.querySelector("#modes").hidden`)
	adminPost(t, m, secret, "/logic/admin/pin", `{"roomId":"`+room+`","content":"Be <b>kind</b> in chat","duration":"5m"}`)
	poll(t, tab, "the pin on the page", `!document.querySelector("#pinned").hidden &&
		document.querySelector("#pin-text").textContent === "Be <b>kind</b> in chat" && !document.querySelector("#pinned b b")`)

	// A page opened now gets both in its welcome.
	late := openPage(t, browser, m.URL(), room, false)
	poll(t, late, "the modes and pin in the welcome", modes+` === "Slow mode · 1 comment / 20 s|Unique chat · 60 s" &&
		document.querySelector("#pin-text").textContent === "Be <b>kind</b> in chat"`)

	sendFromPage(t, tab, "first comment")
	waitShows(t, tab, "the first comment", "first comment")
	poll(t, tab, "the countdown after a send", `/^Wait \d+s$/.test(document.querySelector("#send").textContent) && document.querySelector("#send").disabled`)
	sendFromPage(t, tab, "too soon")
	poll(t, tab, "the slow-mode refusal explained", `/^Slow mode is on: one comment every 20 s in this room\. Wait \d+ s\.$/.test(document.querySelector("#hint").textContent)`)
	left := evalTo[int](t, tab, `Number(document.querySelector("#send").textContent.match(/\d+/)[0])`)
	if left < 15 || left > 20 {
		t.Fatalf("the Send button counts down from %d s, want the rest of 20 s", left)
	}
	if pageShows(t, tab, "too soon") {
		t.Fatal("the refused comment is shown")
	}

	adminPost(t, m, secret, "/logic/admin/room", `{"roomId":"`+room+`","slowSeconds":0,"uniqueSeconds":0}`)
	pin := evalTo[string](t, tab, `danmakuDemo.client.pinned().id`)
	adminPost(t, m, secret, "/logic/admin/unpin", `{"roomId":"`+room+`","ids":["`+pin+`"]}`)
	poll(t, tab, "modes and pin gone", `document.querySelector("#modes").hidden && document.querySelector("#pinned").hidden`)
}
