package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// adminGet reads the admin route path (with its query) of logic base
// with the admin secret into out.
func adminGet(t *testing.T, base, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+modesAdminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// everywhere is how a send of content does at logic and over the
// sockets of both send-taking comets: nil when all three accept it, else
// the first refusal.
func (s *socketStack) everywhere(t *testing.T, conns []*wsviewer.Conn, room, content string, ref *int64) error {
	t.Helper()
	if _, err := stack.Post(s.LogicURL, room, 9300, "poster", []string{content}); err != nil {
		return fmt.Errorf("logic: %w", err)
	}
	for i, c := range conns {
		*ref++
		if f := send(t, c, room, *ref, msg(content, "")); f.Error != nil {
			return fmt.Errorf("comet %d: %s on %s", i, f.Error.Code, f.Error.Field)
		}
	}
	return nil
}

// Blocked words edited through the admin API hold within a second at
// logic and at the socket send path of both comets: a global reject word
// refuses a comment everywhere, and stops when removed; a room's review
// word puts the room's comments (over HTTP and sockets) in its review
// queue, and nothing of another room. The lists read back; the audit log
// names each edit.
func TestBlockedWordsEdited(t *testing.T) {
	s := newSocketStack(t)
	room, other := testkit.Uniq("words_"), testkit.Uniq("words_")
	conns := []*wsviewer.Conn{s.tokenConn(t, 0, room, 9301, nil), s.tokenConn(t, 1, room, 9302, nil)}
	var ref int64
	n := 0
	content := func(word string) string { n++; return fmt.Sprintf("a %s %d", word, n) }
	if err := s.everywhere(t, conns, room, content("spoiler"), &ref); err != nil {
		t.Fatalf("before the edit: %v", err)
	}

	edited := time.Now()
	modesAdmin(t, s.LogicURL, "/logic/admin/words/add", `{"words":["Spoiler"],"actor":"ops"}`, nil)
	if _, err := stack.Post(s.LogicURL, room, 9300, "poster", []string{content("spoiler")}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("logic right after its own edit: %v", err)
	}
	for i, c := range conns {
		testkit.SucceedsSoon(t, time.Second-time.Since(edited), func() error {
			ref++
			if f := send(t, c, room, ref, msg(content("SPOILER"), "")); f.Error == nil || f.Error.Code != danmaku.CodeBlocked {
				return fmt.Errorf("comet %d accepts the word", i)
			}
			return nil
		})
	}
	t.Logf("the global word held everywhere %v after the edit", time.Since(edited).Round(time.Millisecond))

	modesAdmin(t, s.LogicURL, "/logic/admin/words/add", `{"roomId":"`+room+`","words":["leak"],"mode":"review"}`, nil)
	time.Sleep(time.Second)
	ref++
	f := send(t, conns[0], room, ref, msg(content("leak"), ""))
	held, err := stack.Post(s.LogicURL, room, 9300, "poster", []string{content("leak")})
	if f.Ack == nil || err != nil {
		t.Fatalf("review word: %+v %v", f.Error, err)
	}
	var q danmaku.ReviewResponse
	adminGet(t, s.LogicURL, "/logic/admin/review?roomId="+room, &q)
	if len(q.Items) != 2 || q.Items[0].ID != f.Ack.IDs[0] || q.Items[1].ID != held[0] || q.Items[0].Word != "leak" {
		t.Fatalf("review queue %+v, want %s and %s", q.Items, f.Ack.IDs[0], held[0])
	}
	if _, err := stack.Post(s.LogicURL, other, 9300, "poster", []string{content("leak")}); err != nil {
		t.Fatalf("another room: %v", err)
	}
	adminGet(t, s.LogicURL, "/logic/admin/review?roomId="+other, &q)
	if len(q.Items) != 0 {
		t.Fatalf("another room's queue %+v", q.Items)
	}

	var global, roomWords danmaku.WordsResponse
	adminGet(t, s.LogicURL, "/logic/admin/words", &global)
	adminGet(t, s.LogicURL, "/logic/admin/words?roomId="+room, &roomWords)
	if len(global.Words) != 1 || global.Words[0] != (danmaku.WordEntry{Word: "Spoiler", Mode: "reject"}) ||
		len(roomWords.Words) != 1 || roomWords.Words[0] != (danmaku.WordEntry{Word: "leak", Mode: "review"}) {
		t.Fatalf("lists: global %+v, room %+v", global, roomWords)
	}

	edited = time.Now()
	modesAdmin(t, s.LogicURL, "/logic/admin/words/remove", `{"words":["Spoiler"],"actor":"ops"}`, nil)
	testkit.SucceedsSoon(t, time.Second-time.Since(edited), func() error {
		return s.everywhere(t, conns, room, content("spoiler"), &ref)
	})

	var audit danmaku.AuditResponse
	adminGet(t, s.LogicURL, "/logic/admin/audit?limit=10", &audit)
	var seen []string
	for _, e := range audit.Entries {
		if strings.HasPrefix(e.Action, "words_") {
			seen = append(seen, fmt.Sprintf("%s %s %s %v %s", e.Actor, e.Action, e.RoomID, e.Words, e.Mode))
		}
	}
	want := []string{"ops words_remove  [Spoiler] ", "unnamed words_add " + room + " [leak] review", "ops words_add  [Spoiler] reject"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("audit %q, want %q", seen, want)
	}
}
