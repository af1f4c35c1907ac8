package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
)

// everShown makes tab record the id of every line its chat log ever had
// (window.__ever), so a comment shown and then taken away is caught too.
func everShown(t *testing.T, tab context.Context) {
	t.Helper()
	evalTo[bool](t, tab, `(() => { window.__ever = new Set();
		const note = () => document.querySelectorAll("#log li[data-id]").forEach(li => window.__ever.add(li.dataset.id));
		note(); new MutationObserver(note).observe(document.querySelector("#log"), {childList: true, subtree: true});
		return true; })()`)
}

// TestConsoleHeld: with a chat delay set in the console, a moderator sees
// the viewers' held comments in the Held tab with their countdown, deletes
// one there with one click; the other reaches both viewer pages and the
// live view after the delay, the deleted one never reaches any of them nor
// the history, and the Held tab empties.
func TestConsoleHeld(t *testing.T) {
	m := startConsoleMain(t)
	browser := newBrowser(t)
	room := testkit.Uniq("console_held_")
	a := openPage(t, browser, m.URL(), room, true)
	b := openPage(t, browser, m.URL(), room, false)
	mod := openConsole(t, browser, m, consoleSecret, room, false)
	for _, tab := range []context.Context{a, b} {
		everShown(t, tab)
	}
	evalTo[bool](t, mod, `(() => { document.querySelector("#set-delay").value = "6";
		document.querySelector("#settings-form").requestSubmit(); return true; })()`)
	poll(t, mod, "the console shows the delay", `[...document.querySelectorAll("#modes .mode")].some(e => e.textContent === "delay 6 s")`)
	click(t, mod, `[data-tab="held"]`)

	sent := time.Now()
	ids := send(t, m, room, "held and kept", "held and deleted")
	item := func(id string) string { return `document.querySelector('#held-list li[data-id="` + id + `"]')` }
	poll(t, mod, "both held comments in the Held tab", item(ids[0])+` && `+item(ids[1])+
		` && `+item(ids[1])+`.querySelector(".text").textContent === "held and deleted"`+
		` && /^shown in [1-6] s$/.test(`+item(ids[1])+`.querySelector(".time").textContent)`+
		` && document.querySelector("#held-count").textContent === "2"`)
	if os.Getenv("DANMAKU_SCREENSHOTS") != "" {
		poll(t, mod, "the notices gone", `!document.querySelector("#toasts").children.length`)
		screenshot(t, mod, "console-held", 1366, 768)
	}
	click(t, mod, `#held-list li[data-id="`+ids[1]+`"] button[data-act="delete"]`)
	poll(t, mod, "the deleted comment leaves the Held tab", `!`+item(ids[1])+` && `+item(ids[0]))
	if d := time.Since(sent); d > 5*time.Second {
		t.Fatalf("the delete came %v after the send: too late to prove anything of a 6 s delay", d)
	}

	for name, tab := range map[string]context.Context{"A": a, "B": b} {
		waitLogOnce(t, tab, "viewer "+name, ids[:1])
	}
	poll(t, mod, "the kept comment in the live view", inFeed(ids[0]))
	poll(t, mod, "the Held tab empties", `!`+item(ids[0])+` && !document.querySelector("#held-empty").hidden`)
	time.Sleep(time.Second)
	for name, tab := range map[string]context.Context{"A": a, "B": b} {
		if ever := evalTo[[]string](t, tab, `[...window.__ever]`); !slices.Equal(ever, ids[:1]) {
			t.Fatalf("viewer %s showed %v, want %v alone", name, ever, ids[:1])
		}
	}
	if evalTo[bool](t, mod, inFeed(ids[1])+` !== null`) {
		t.Fatal("the live view showed the deleted comment")
	}
	resp, err := http.Get(m.URL() + "logic/history?roomId=" + room)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h danmaku.HistoryResponse
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 1 || h.Messages[0].ID != ids[0] {
		t.Fatalf("history %+v, want %s alone", h.Messages, ids[0])
	}
}
