package logic

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
)

// modesEnv is a logic Server with auth on and the admin API on; token
// mints a token for uid with roles, allowed every room, or rooms.
func modesEnv(t *testing.T) (e *testEnv, admin func(body string) response, send func(tok, room, content string) response, token func(uid int64, rooms []string, roles ...string) string) {
	const secret = "admin-secret-0123456789"
	keys := tokens.New(t)
	e = newEnv(t, withAuth(keys.Verifier(t)), func(c *Config, _ *testEnv) { c.AdminSecret = secret })
	admin = func(body string) response {
		t.Helper()
		return e.doWith(t, http.MethodPost, "/logic/admin/room", headers("Authorization", "Bearer "+secret), []byte(body))
	}
	send = func(tok, room, content string) response {
		t.Helper()
		return e.doWith(t, http.MethodPost, "/logic/send", headers("Authorization", "Bearer "+tok),
			jsonBody(t, map[string]any{"roomId": room, "messages": []any{map[string]string{"content": content}}}))
	}
	token = func(uid int64, rooms []string, roles ...string) string {
		t.Helper()
		tok, err := auth.Mint(keys.Secret, auth.Claims{UID: uid, Rooms: rooms, Roles: roles, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return e, admin, send, token
}

func wantRefused(t *testing.T, what string, r response, status int, code, field string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
	if b := r.errorBody(t); b.Code != code || b.Field != field {
		t.Fatalf("%s: %+v, want code %s field %s", what, b, code, field)
	}
}

func wantAccepted(t *testing.T, what string, r response) {
	t.Helper()
	if r.status != http.StatusAccepted {
		t.Fatalf("%s: %d %s, want 202", what, r.status, r.body)
	}
}

// Slow mode refuses a user's second send within the interval with 429
// slow_mode and Retry-After, and a request of several messages; other
// users and moderators of the room send; the user sends again after the
// interval, and at once when slow mode is off again.
func TestSlowMode(t *testing.T) {
	e, admin, send, token := modesEnv(t)
	room, other := testkit.Uniq("r"), testkit.Uniq("r")
	if r := admin(`{"roomId":"` + room + `","slowSeconds":2}`); r.status != http.StatusOK {
		t.Fatalf("slow mode on: %d %s", r.status, r.body)
	}
	ann, bob, mod := newUser(), newUser(), newUser()
	wantAccepted(t, "first", send(token(ann, nil), room, "one"))
	r := send(token(ann, nil), room, "two")
	wantRefused(t, "second within 2 s", r, http.StatusTooManyRequests, danmaku.CodeSlowMode, "userId")
	if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); ra < 1 || ra > 2 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	wantAccepted(t, "another room", send(token(ann, nil), other, "two"))
	wantAccepted(t, "another user", send(token(bob, nil), room, "hi"))
	for i := range 3 {
		wantAccepted(t, "a moderator", send(token(mod, []string{room}, auth.RoleModerator), room, fmt.Sprint("mod ", i)))
	}
	// The moderator role binds the token's rooms only.
	modElsewhere := token(mod, []string{"elsewhere", room}, auth.RoleModerator)
	wantAccepted(t, "a moderator of the room among others", send(modElsewhere, room, "ok"))
	wantAccepted(t, "a member is no moderator", send(token(newUser(), nil, auth.RoleMember), room, "a"))
	several := e.doWith(t, http.MethodPost, "/logic/send", headers("Authorization", "Bearer "+token(newUser(), nil)),
		jsonBody(t, sendReq(room, 0, "a", "b")))
	wantRefused(t, "two messages in one request", several, http.StatusBadRequest, danmaku.EINVALID, "messages")
	time.Sleep(2100 * time.Millisecond)
	wantAccepted(t, "after the interval", send(token(ann, nil), room, "three"))
	if r := admin(`{"roomId":"` + room + `","slowSeconds":0}`); r.status != http.StatusOK {
		t.Fatalf("slow mode off: %d %s", r.status, r.body)
	}
	wantAccepted(t, "slow mode off", send(token(ann, nil), room, "four"))
	if n := e.counter(t, "danmaku_logic_send_refused_total"); n != 2 {
		t.Errorf("slow_mode refusals counted %v, want 2", n)
	}
}

// A members-only room refuses tokens without the member role with 403
// members_only (a moderator of the room may send), and sends are open
// again once the mode is off.
func TestMembersOnly(t *testing.T) {
	e, admin, send, token := modesEnv(t)
	room := testkit.Uniq("r")
	if r := admin(`{"roomId":"` + room + `","membersOnly":true}`); r.status != http.StatusOK {
		t.Fatalf("members-only on: %d %s", r.status, r.body)
	}
	wantRefused(t, "no role", send(token(newUser(), nil), room, "hi"), http.StatusForbidden, danmaku.CodeMembers, "roomId")
	wantRefused(t, "another role", send(token(newUser(), nil, auth.RolePriority), room, "hi"), http.StatusForbidden, danmaku.CodeMembers, "roomId")
	wantAccepted(t, "member", send(token(newUser(), nil, auth.RoleMember), room, "hi"))
	wantAccepted(t, "moderator", send(token(newUser(), []string{room}, auth.RoleModerator), room, "hi"))
	wantAccepted(t, "another room", send(token(newUser(), nil), testkit.Uniq("r"), "hi"))
	if r := admin(`{"roomId":"` + room + `","membersOnly":false}`); r.status != http.StatusOK {
		t.Fatalf("members-only off: %d %s", r.status, r.body)
	}
	wantAccepted(t, "mode off", send(token(newUser(), nil), room, "hi"))
	if n := e.counter(t, "danmaku_logic_send_refused_total"); n != 2 {
		t.Errorf("members_only refusals counted %v, want 2", n)
	}
}

// Unique chat refuses a comment whose plain form repeats one sent to the
// room within the interval, from any user, with 409 duplicate_content
// naming the message; moderators are exempt; after the interval it goes.
func TestUniqueChat(t *testing.T) {
	e, admin, send, token := modesEnv(t)
	room := testkit.Uniq("r")
	if r := admin(`{"roomId":"` + room + `","uniqueSeconds":1}`); r.status != http.StatusOK {
		t.Fatalf("unique chat on: %d %s", r.status, r.body)
	}
	wantAccepted(t, "first", send(token(newUser(), nil), room, "Hello there!"))
	for _, c := range []string{"hello there", "HELLO THERE!!!", "ｈｅｌｌｏ ｔｈｅｒｅ", "hеllo there"} {
		wantRefused(t, c, send(token(newUser(), nil), room, c), http.StatusConflict, danmaku.CodeDuplicate, "messages[0].content")
	}
	wantAccepted(t, "other words", send(token(newUser(), nil), room, "hello where"))
	wantAccepted(t, "a moderator", send(token(newUser(), []string{room}, auth.RoleModerator), room, "hello there"))
	several := e.doWith(t, http.MethodPost, "/logic/send", headers("Authorization", "Bearer "+token(newUser(), nil)),
		jsonBody(t, sendReq(room, 0, "fresh one", "Fresh one!")))
	wantRefused(t, "a repeat within one request", several, http.StatusConflict, danmaku.CodeDuplicate, "messages[1].content")
	time.Sleep(1100 * time.Millisecond)
	wantAccepted(t, "after the interval", send(token(newUser(), nil), room, "hello there"))
}

// The room settings route checks its input, answers the settings without
// a change when it names no mode, and GET /logic/room answers them.
func TestAdminRoom(t *testing.T) {
	e, admin, _, token := modesEnv(t)
	room := testkit.Uniq("r")
	for body, field := range map[string]string{
		`{"slowSeconds":5}`:                                  "roomId",
		`{"roomId":"a:b","slowSeconds":5}`:                   "roomId",
		`{"roomId":"` + room + `","slowSeconds":-1}`:         "slowSeconds",
		`{"roomId":"` + room + `","uniqueSeconds":86401}`:    "uniqueSeconds",
		`{"roomId":"` + room + `","slowSeconds":"5"}`:        "slowSeconds",
		`{"roomId":"` + room + `","membersOnly":1}`:          "membersOnly",
		`{"roomId":"` + room + `","membersOnly":true,"x":1}`: "x",
	} {
		if r := admin(body); r.status != http.StatusBadRequest || r.errorBody(t).Field != field {
			t.Errorf("%s: %d %s, want 400 naming %s", body, r.status, r.body, field)
		}
	}
	if r := admin(`{"roomId":"` + room + `"}`); r.status != http.StatusOK || string(r.body) != `{"action":"room","roomId":"`+room+`","state":{"ver":0}}`+"\n" {
		t.Fatalf("read: %d %s", r.status, r.body)
	}
	if r := admin(`{"roomId":"` + room + `","slowSeconds":10,"actor":"mod-ann"}`); r.status != http.StatusOK {
		t.Fatalf("set: %d %s", r.status, r.body)
	}
	r := e.doWith(t, http.MethodGet, "/logic/room?roomId="+room, headers("Authorization", "Bearer "+token(newUser(), nil)), nil)
	if r.status != http.StatusOK || string(r.body) != `{"roomId":"`+room+`","state":{"ver":1,"slowSeconds":10}}`+"\n" {
		t.Fatalf("GET /logic/room: %d %s", r.status, r.body)
	}
	r = e.doWith(t, http.MethodGet, "/logic/room?roomId="+room, headers("Authorization", "Bearer "+token(newUser(), []string{"other"})), nil)
	wantRefused(t, "a token of another room", r, http.StatusForbidden, danmaku.CodeForbidden, "roomId")
}

// The first sends to a room nobody read yet, all at once, make one read
// of its settings: the others wait for it.
func TestRoomStateFirstReadShared(t *testing.T) {
	e := newEnv(t)
	room := testkit.Uniq("r")
	before := e.rdb.Info(t.Context(), "commandstats").Val()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := e.srv.send.RoomState(context.Background(), room); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	after := e.rdb.Info(t.Context(), "commandstats").Val()
	if n := hgetallCalls(after) - hgetallCalls(before); n != 1 {
		t.Fatalf("200 concurrent first reads made %d HGETALLs, want 1", n)
	}
}

// hgetallCalls reads the HGETALL count of INFO commandstats.
func hgetallCalls(info string) int {
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_hgetall:calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}
