package logic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/testkit"
)

// A token with the moderator role runs the room actions on the rooms of
// its token, without the admin secret, and nothing else: not on another
// room, not everywhere, not the blocked words; a token without the role
// is refused as a wrong secret. Every action is in the audit log with its
// actor (the moderator's user, whatever the body says), and a moderator
// reads the log of its rooms only.
func TestModeratorToken(t *testing.T) {
	e, admin, send, token := modesEnv(t)
	room, other := testkit.Uniq("r"), testkit.Uniq("r")
	modUID, bad := newUser(), newUser()
	mod := token(modUID, []string{room}, auth.RoleModerator)
	as := func(tok, method, path, body string) response {
		t.Helper()
		return e.doWith(t, method, path, headers("Authorization", "Bearer "+tok), []byte(body))
	}
	if r := as(mod, http.MethodPost, "/logic/admin/room", `{"roomId":"`+room+`","slowSeconds":5,"actor":"forged"}`); r.status != http.StatusOK {
		t.Fatalf("moderator sets its room: %d %s", r.status, r.body)
	}
	if r := as(mod, http.MethodPost, "/logic/admin/mute", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"1m"}`, bad, room)); r.status != http.StatusOK {
		t.Fatalf("moderator mutes in its room: %d %s", r.status, r.body)
	}
	wantRefused(t, "muted by a moderator", send(token(bad, nil), room, "hi"), http.StatusForbidden, danmaku.CodeMuted, "userId")
	for _, c := range []struct{ path, body, field string }{
		{"/logic/admin/room", `{"roomId":"` + other + `","slowSeconds":5}`, "roomId"},
		{"/logic/admin/mute", fmt.Sprintf(`{"userId":%d,"duration":"1m"}`, bad), "roomId"},
		{"/logic/admin/ban", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"1m"}`, bad, other), "roomId"},
		{"/logic/admin/words/reload", `{}`, "Authorization"},
	} {
		wantRefused(t, c.path+" "+c.body, as(mod, http.MethodPost, c.path, c.body), http.StatusForbidden, danmaku.CodeForbidden, c.field)
	}
	for name, tok := range map[string]string{"no role": token(newUser(), []string{room}), "member": token(newUser(), []string{room}, auth.RoleMember)} {
		wantRefused(t, name, as(tok, http.MethodPost, "/logic/admin/room", `{"roomId":"`+room+`","slowSeconds":0}`),
			http.StatusUnauthorized, danmaku.EUNAUTH, "Authorization")
	}
	if r := admin(`{"roomId":"` + other + `","uniqueSeconds":3,"actor":"backend"}`); r.status != http.StatusOK {
		t.Fatalf("admin: %d %s", r.status, r.body)
	}

	read := func(tok, query string) []danmaku.AuditEntry {
		t.Helper()
		r := as(tok, http.MethodGet, "/logic/admin/audit"+query, "")
		if r.status != http.StatusOK {
			t.Fatalf("audit %s: %d %s", query, r.status, r.body)
		}
		var a danmaku.AuditResponse
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		return a.Entries
	}
	got := read(mod, "?roomId="+room)
	if len(got) != 2 || got[0].Action != "mute" || got[0].UserID != bad || got[1].Action != "room" ||
		got[1].State == nil || got[1].State.SlowSeconds != 5 {
		t.Fatalf("the room's audit log: %+v", got)
	}
	for _, en := range got {
		if en.Actor != fmt.Sprint("user:", modUID) || en.RoomID != room || en.TS == 0 {
			t.Fatalf("entry %+v", en)
		}
	}
	wantRefused(t, "a moderator reading another room's log", as(mod, http.MethodGet, "/logic/admin/audit?roomId="+other, ""),
		http.StatusForbidden, danmaku.CodeForbidden, "roomId")
	wantRefused(t, "a moderator reading the whole log", as(mod, http.MethodGet, "/logic/admin/audit", ""),
		http.StatusForbidden, danmaku.CodeForbidden, "roomId")
	all := read("admin-secret-0123456789", "?limit=3")
	if len(all) != 3 || all[0].Actor != "backend" || all[0].RoomID != other {
		t.Fatalf("the whole log: %+v", all)
	}
	wantRefused(t, "bad limit", as("admin-secret-0123456789", http.MethodGet, "/logic/admin/audit?limit=0", ""),
		http.StatusBadRequest, danmaku.EINVALID, "limit")
}
