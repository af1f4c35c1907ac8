package main

import (
	"os"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit"
)

// TestConsoleWords: a word the moderator blocks for the room in the
// console's Words tab refuses a viewer page's comment at once (the page
// says why), a word blocked for review holds one in the Review tab, the
// tab lists both with their modes, and a removed word passes again; the
// edits are in the audit log.
func TestConsoleWords(t *testing.T) {
	m := startConsoleMain(t)
	browser := newBrowser(t)
	room := testkit.Uniq("console_words_")
	viewer := openPage(t, browser, m.URL(), room, true)
	mod := openConsole(t, browser, m, consoleSecret, room, false)
	click(t, mod, `[data-tab="words"]`)
	add := func(word, mode string) {
		t.Helper()
		evalTo[bool](t, mod, `(() => { document.querySelector("#words-input").value = "`+word+`";
			document.querySelector("#words-mode").value = "`+mode+`";
			document.querySelector("#words-form").requestSubmit(); return true; })()`)
		poll(t, mod, word+" in the list", `document.querySelector('#words-list li[data-word="`+word+`"]')`)
	}
	add("spoilerz", "reject")
	add("leakz", "review")
	words := `[...document.querySelectorAll("#words-list li")].map(li => li.textContent).join("|")`
	poll(t, mod, "the room's list", words+` === "spoilerz refusedRemove|leakz held for reviewRemove" || `+
		words+` === "leakz held for reviewRemove|spoilerz refusedRemove"`)

	sendFromPage(t, viewer, "the spoilerz of the day")
	poll(t, viewer, "the page explains the refusal", `document.querySelector("#hint").textContent.includes("blocked")`)
	sendFromPage(t, viewer, "a leakz to review")
	click(t, mod, `[data-tab="review"]`)
	poll(t, mod, "the comment in the Review tab", `[...document.querySelectorAll("#review-list li")].some(li =>
		li.querySelector(".word").textContent === "leakz" && li.querySelector(".text").textContent === "a leakz to review")`)
	if os.Getenv("DANMAKU_SCREENSHOTS") != "" {
		click(t, mod, `[data-tab="words"]`)
		poll(t, mod, "the notices gone", `!document.querySelector("#toasts").children.length`)
		screenshot(t, mod, "console-words", 1366, 768)
	}

	click(t, mod, `[data-tab="words"]`)
	poll(t, mod, "the list again", `document.querySelector('#words-list li[data-word="spoilerz"]')`)
	click(t, mod, `#words-list li[data-word="spoilerz"] button[data-act="remove"]`)
	poll(t, mod, "spoilerz removed", `!document.querySelector('#words-list li[data-word="spoilerz"]')`)
	sendFromPage(t, viewer, "the spoilerz passes now")
	waitShows(t, viewer, "the comment once the word is removed", "the spoilerz passes now")
	if pageShows(t, viewer, "the spoilerz of the day") || pageShows(t, viewer, "a leakz to review") {
		t.Fatal("a refused or held comment reached the viewer")
	}

	click(t, mod, `[data-tab="audit"]`)
	poll(t, mod, "the edits in the audit log", `[...document.querySelectorAll("#audit-list .action")].map(e => e.textContent).join(",") === "words_remove,words_add,words_add"`)
}
