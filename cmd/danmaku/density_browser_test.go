package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
)

// TestBrowserDensity drives the demo page's density control in headless
// chromium against the all-in-one binary: over a compressed socket, the
// slider set to 10 a second changes the cap on the open socket (the server
// names the tier), a busy room then shows a fraction of its comments and
// the count of those left out ("+N skipped"), the viewer's own comment
// still shows, and a high-priority comment is pinned and coloured. Back
// at "all", every comment shows again.
func TestBrowserDensity(t *testing.T) {
	m := startMain(t, func(c *Config) {
		c.Logic.RateLimit, c.Logic.RateBurst, c.Logic.IPRateLimit = 1e6, 1e6, 0
	})
	room := "density_room"
	tab := openPage(t, newBrowser(t), m.URL(), room, true)
	if ext := evalTo[string](t, tab, `danmakuDemo.client.ws.extensions`); !strings.Contains(ext, "permessage-deflate") {
		t.Fatalf("the page's socket is not compressed: extensions %q", ext)
	}
	if at := evalTo[string](t, tab, `document.querySelector("#density-text").textContent`); at != "all" {
		t.Fatalf("a new page's density: %q, want all", at)
	}
	setSlider(t, tab, 0, "10")

	sendBurst(t, m, room, "busy", 400)
	sendFromPage(t, tab, "my own words at ten a second")
	waitShows(t, tab, "the capped page", "my own words at ten a second")
	// A capped tier's frame holds up to a second of comments, which the
	// page flies over that second: wait until it showed them.
	poll(t, tab, "every comment shown or counted skipped", `Number(document.querySelector("#skipped").textContent.replace(/[+,]/g, "")) > 100 &&
		[...document.querySelectorAll("#log li")].filter(e => e.textContent.includes("busy ")).length + danmakuDemo.client.skipped() === 400`)
	shown := evalTo[int](t, tab, `[...document.querySelectorAll("#log li")].filter(e => e.textContent.includes("busy ")).length`)
	skipped := evalTo[int](t, tab, `danmakuDemo.client.skipped()`)
	if shown+skipped != 400 || shown > 150 {
		t.Fatalf("at 10/s the page showed %d of the room's 400 comments and counted %d skipped", shown, skipped)
	}
	t.Logf("at 10/s: %d of 400 comments shown, %d skipped", shown, skipped)

	high := danmaku.Message{ID: "high-" + room, UID: 9, Name: "mod", Content: "a pinned paid comment",
		TS: time.Now().UnixMilli(), Priority: danmaku.PriorityHigh}
	if n := m.comet.Broadcast(danmaku.NewBatch(room, []danmaku.Message{high})); n != 1 {
		t.Fatalf("high-priority comment reached %d viewers", n)
	}
	poll(t, tab, "the high-priority comment is pinned and marked", `[...document.querySelectorAll("#pins .pin")].some(e => e.textContent.includes("a pinned paid comment")) &&
		[...document.querySelectorAll("#log li.high")].some(e => e.textContent.includes("a pinned paid comment"))`)

	setSlider(t, tab, 3, "0")
	// The chat log keeps its last 150 lines: 100 comments fit.
	sendBurst(t, m, room, "after", 100)
	poll(t, tab, "every comment at all", `[...document.querySelectorAll("#log li")].filter(e => e.textContent.includes("after ")).length === 100`)
}

// setSlider moves the page's density slider to step and waits until the
// server serves the tier whose cap is served ("0": every comment).
func setSlider(t *testing.T, tab context.Context, step int, served string) {
	t.Helper()
	evalTo[bool](t, tab, fmt.Sprintf(`(() => { const s = document.querySelector("#density"); s.value = "%d";
		s.dispatchEvent(new Event("input")); return true; })()`, step))
	poll(t, tab, "the server serves the tier", `document.querySelector("#density-text").dataset.served === "`+served+`"`)
}

// sendBurst posts n comments to room in 20 requests, spread over about a
// second, from other users than the page's.
func sendBurst(t *testing.T, m *Main, room, prefix string, n int) {
	t.Helper()
	per := n / 20
	for k := range 20 {
		var msgs []string
		for i := range per {
			msgs = append(msgs, fmt.Sprintf(`{"content":"%s %d"}`, prefix, k*per+i))
		}
		body := fmt.Sprintf(`{"roomId":%q,"userId":%d,"userName":"crowd","messages":[%s]}`, room, 100+k, strings.Join(msgs, ","))
		resp, err := http.Post(m.URL()+"logic/send", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("send: status %d", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
