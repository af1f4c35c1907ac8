package logic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/testkit"
)

// GET /logic/admin/lists answers what is in force in a room (settings,
// mutes, bans, hides, pin, each with its end) and, for the admin secret,
// in the whole service; lifted and ended sanctions leave the lists; a
// moderator reads its rooms only.
func TestAdminLists(t *testing.T) {
	const secret = "admin-secret-0123456789"
	e, admin, _, token := modesEnv(t)
	room, other := testkit.Uniq("r"), testkit.Uniq("r")
	as := func(tok, method, path, body string) response {
		t.Helper()
		return e.doWith(t, method, path, headers("Authorization", "Bearer "+tok), []byte(body))
	}
	do := func(path, body string) {
		t.Helper()
		if r := as(secret, http.MethodPost, path, body); r.status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", path, body, r.status, r.body)
		}
	}
	lists := func(tok, query string) ListsResponse {
		t.Helper()
		r := as(tok, http.MethodGet, "/logic/admin/lists"+query, "")
		if r.status != http.StatusOK {
			t.Fatalf("lists %s: %d %s", query, r.status, r.body)
		}
		var l ListsResponse
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	muted, short, banned, hidden, everywhere := newUser(), newUser(), newUser(), newUser(), newUser()
	start := time.Now()
	if r := admin(`{"roomId":"` + room + `","slowSeconds":7}`); r.status != http.StatusOK {
		t.Fatalf("room: %d %s", r.status, r.body)
	}
	do("/logic/admin/mute", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"10m"}`, muted, room))
	do("/logic/admin/mute", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"1s"}`, short, room))
	do("/logic/admin/ban", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"1h"}`, banned, room))
	do("/logic/admin/hide", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"5m"}`, hidden, room))
	do("/logic/admin/mute", fmt.Sprintf(`{"userId":%d,"duration":"2h"}`, everywhere))
	do("/logic/admin/ban", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"1h"}`, muted, other))
	do("/logic/admin/pin", `{"roomId":"`+room+`","content":"welcome","duration":"1m"}`)

	near := func(what string, until int64, d time.Duration) {
		t.Helper()
		want := start.Add(d).UnixMilli()
		if until < want-2000 || until > want+5000 {
			t.Errorf("%s until %d, want about %d", what, until, want)
		}
	}
	l := lists(secret, "?roomId="+room)
	if l.RoomID != room || l.Settings == nil || l.Settings.SlowSeconds != 7 || l.Pin == nil || l.Pin.Content != "welcome" {
		t.Fatalf("room lists: %+v", l)
	}
	if len(l.Mutes) != 2 || l.Mutes[0].User != short || l.Mutes[1].User != muted || len(l.Bans) != 1 || l.Bans[0].User != banned ||
		len(l.Hidden) != 1 || l.Hidden[0].User != hidden {
		t.Fatalf("room lists: %+v", l)
	}
	near("mute", l.Mutes[1].Until, 10*time.Minute)
	near("ban", l.Bans[0].Until, time.Hour)
	near("hide", l.Hidden[0].Until, 5*time.Minute)
	near("pin", l.Pin.Until, time.Minute)

	// Lifted and ended sanctions go.
	do("/logic/admin/unban", fmt.Sprintf(`{"userId":%d,"roomId":"%s"}`, banned, room))
	do("/logic/admin/unhide", fmt.Sprintf(`{"userId":%d,"roomId":"%s"}`, hidden, room))
	do("/logic/admin/unpin", `{"roomId":"`+room+`","ids":["`+l.Pin.ID+`"]}`)
	time.Sleep(time.Until(start.Add(1100 * time.Millisecond)))
	l = lists(secret, "?roomId="+room)
	if len(l.Mutes) != 1 || l.Mutes[0].User != muted || len(l.Bans) != 0 || len(l.Hidden) != 0 || l.Pin != nil {
		t.Fatalf("room lists after unban, unhide, unpin and a mute's end: %+v", l)
	}

	g := lists(secret, "")
	if g.Settings != nil || g.RoomID != "" || g.Pin != nil {
		t.Fatalf("service lists: %+v", g)
	}
	found := map[string]bool{}
	for _, x := range g.Mutes {
		found[fmt.Sprint("mute ", x.User, " ", x.RoomID)] = true
	}
	for _, x := range g.Bans {
		found[fmt.Sprint("ban ", x.User, " ", x.RoomID)] = true
	}
	for _, want := range []string{fmt.Sprint("mute ", muted, " ", room), fmt.Sprint("mute ", everywhere, " "), fmt.Sprint("ban ", muted, " ", other)} {
		if !found[want] {
			t.Errorf("service lists miss %q: %+v", want, g)
		}
	}
	for _, gone := range []string{fmt.Sprint("ban ", banned, " ", room), fmt.Sprint("mute ", short, " ", room)} {
		if found[gone] {
			t.Errorf("service lists still hold %q", gone)
		}
	}

	// Moderators read their rooms; bad input is a 400 naming the field.
	mod := token(newUser(), []string{room}, auth.RoleModerator)
	if l := lists(mod, "?roomId="+room); len(l.Mutes) != 1 {
		t.Fatalf("moderator's lists: %+v", l)
	}
	wantRefused(t, "a moderator's other room", as(mod, http.MethodGet, "/logic/admin/lists?roomId="+other, ""), http.StatusForbidden, danmaku.CodeForbidden, "roomId")
	wantRefused(t, "a moderator's service lists", as(mod, http.MethodGet, "/logic/admin/lists", ""), http.StatusForbidden, danmaku.CodeForbidden, "roomId")
	wantRefused(t, "bad room", as(secret, http.MethodGet, "/logic/admin/lists?roomId=a:b", ""), http.StatusBadRequest, danmaku.EINVALID, "roomId")
	wantRefused(t, "no secret", as("nope", http.MethodGet, "/logic/admin/lists?roomId="+room, ""), http.StatusUnauthorized, danmaku.EUNAUTH, "Authorization")
	if r := as(secret, http.MethodPost, "/logic/admin/lists?roomId="+room, "{}"); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", r.status)
	}
}

// The delay and review modes are set like the others: delaySeconds 0 to
// 60 (400 naming it beyond), review a bool; both come back in the state.
func TestDelayAndReviewSettings(t *testing.T) {
	_, admin, _, _ := modesEnv(t)
	room := testkit.Uniq("r")
	for _, body := range []string{`"delaySeconds":61`, `"delaySeconds":-1`} {
		r := admin(`{"roomId":"` + room + `",` + body + `}`)
		wantRefused(t, body, r, http.StatusBadRequest, danmaku.EINVALID, "delaySeconds")
	}
	r := admin(`{"roomId":"` + room + `","delaySeconds":5,"review":true}`)
	var resp danmaku.AdminResponse
	if r.status != http.StatusOK || json.Unmarshal(r.body, &resp) != nil || resp.State == nil ||
		resp.State.DelaySeconds != 5 || !resp.State.Review {
		t.Fatalf("set: %d %s", r.status, r.body)
	}
	r = admin(`{"roomId":"` + room + `","review":false}`)
	resp = danmaku.AdminResponse{}
	if json.Unmarshal(r.body, &resp) != nil || resp.State.DelaySeconds != 5 || resp.State.Review {
		t.Fatalf("review off: %d %s", r.status, r.body)
	}
}

// The review routes take the admin secret or a moderator token of the
// room, and refuse bad input naming the field.
func TestReviewRoutes(t *testing.T) {
	const secret = "admin-secret-0123456789"
	e, _, _, token := modesEnv(t)
	room := testkit.Uniq("r")
	mod := token(newUser(), []string{room}, auth.RoleModerator)
	as := func(tok, method, path, body string) response {
		t.Helper()
		return e.doWith(t, method, path, headers("Authorization", "Bearer "+tok), []byte(body))
	}
	if r := as(mod, http.MethodGet, "/logic/admin/review?roomId="+room, ""); r.status != http.StatusOK || string(r.body) != `{"roomId":"`+room+`","items":[]}`+"\n" {
		t.Fatalf("empty queue: %d %q", r.status, r.body)
	}
	if r := as(mod, http.MethodPost, "/logic/admin/review/reject", `{"roomId":"`+room+`","ids":["x1"]}`); r.status != http.StatusOK || !strings.Contains(string(r.body), `"rejected":0`) {
		t.Fatalf("reject nothing: %d %s", r.status, r.body)
	}
	other := testkit.Uniq("r")
	wantRefused(t, "another room", as(mod, http.MethodGet, "/logic/admin/review?roomId="+other, ""), http.StatusForbidden, danmaku.CodeForbidden, "roomId")
	wantRefused(t, "approve in another room", as(mod, http.MethodPost, "/logic/admin/review/approve", `{"roomId":"`+other+`","ids":["x1"]}`),
		http.StatusForbidden, danmaku.CodeForbidden, "roomId")
	wantRefused(t, "no room", as(secret, http.MethodGet, "/logic/admin/review", ""), http.StatusBadRequest, danmaku.EINVALID, "roomId")
	wantRefused(t, "bad limit", as(secret, http.MethodGet, "/logic/admin/review?roomId="+room+"&limit=0", ""), http.StatusBadRequest, danmaku.EINVALID, "limit")
	wantRefused(t, "no ids", as(secret, http.MethodPost, "/logic/admin/review/approve", `{"roomId":"`+room+`"}`), http.StatusBadRequest, danmaku.EINVALID, "ids")
	wantRefused(t, "bad id", as(secret, http.MethodPost, "/logic/admin/review/approve", `{"roomId":"`+room+`","ids":["a:b"]}`), http.StatusBadRequest, danmaku.EINVALID, "ids[0]")
}
