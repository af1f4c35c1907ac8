package logic

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
)

const prioAdminSecret = "admin-secret-0123456789"

// roleToken returns a token of keys for uid granting roles.
func roleToken(t *testing.T, keys *tokens.Keys, uid int64, roles ...string) string {
	t.Helper()
	tok, err := auth.Mint(keys.Secret, auth.Claims{UID: uid, Name: "mod", Roles: roles, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// highBody is a send body of n high-priority messages.
func highBody(t *testing.T, room string, uid int64, n int) []byte {
	t.Helper()
	req := sendReq(room, uid)
	for i := 0; i < n; i++ {
		req.Messages = append(req.Messages, SendMessage{Content: fmt.Sprintf("paid %d", i)})
	}
	req.Priority = danmaku.PriorityHigh
	return jsonBody(t, req)
}

// Who may send high priority: a token with the moderator or the priority
// role, and the admin API; a plain sender, with or without a token, gets
// 403 priority_denied. The records carry the lane; a normal one leaves it
// out. The moderator's is marked as a moderator's (mod).
func TestHighPriorityWho(t *testing.T) {
	keys := tokens.New(t)
	e := newEnv(t, withAuth(keys.Verifier(t)), func(c *Config, _ *testEnv) { c.AdminSecret = prioAdminSecret })
	room, uid := testkit.Uniq("r"), newUser()
	bearer := func(tok string) http.Header { return headers("Authorization", "Bearer "+tok) }
	for name, h := range map[string]http.Header{
		"no role":     bearer(roleToken(t, keys, uid)),
		"member role": bearer(roleToken(t, keys, uid, auth.RoleMember, "vip")),
	} {
		r := e.doWith(t, http.MethodPost, "/logic/send", h, highBody(t, room, uid, 1))
		if d := r.errorBody(t); r.status != http.StatusForbidden || d.Code != danmaku.CodePriorityDenied || d.Field != "priority" {
			t.Fatalf("%s: %d %s, want 403 priority_denied", name, r.status, r.body)
		}
	}
	for _, role := range []string{auth.RoleModerator, auth.RolePriority} {
		r := e.doWith(t, http.MethodPost, "/logic/send", bearer(roleToken(t, keys, uid, role)), highBody(t, room, uid, 1))
		if r.status != http.StatusAccepted {
			t.Fatalf("role %s: %d %s", role, r.status, r.body)
		}
	}
	// The admin API, as a system account the body names.
	if r := e.doWith(t, http.MethodPost, "/logic/admin/send", headers(), highBody(t, room, 1, 1)); r.status != http.StatusUnauthorized {
		t.Fatalf("admin send without the secret: %d %s", r.status, r.body)
	}
	r := e.doWith(t, http.MethodPost, "/logic/admin/send", bearer(prioAdminSecret), highBody(t, room, 1, 1))
	if r.status != http.StatusAccepted {
		t.Fatalf("admin send: %d %s", r.status, r.body)
	}
	// A normal send of a token holder, without the field.
	if r := e.doWith(t, http.MethodPost, "/logic/send", bearer(roleToken(t, keys, uid)), jsonBody(t, sendReq(room, uid, "plain"))); r.status != http.StatusAccepted {
		t.Fatalf("normal send: %d %s", r.status, r.body)
	}
	recs := readRoom(t, e, room, 4)
	for i, want := range []danmaku.Priority{danmaku.PriorityHigh, danmaku.PriorityHigh, danmaku.PriorityHigh, danmaku.PriorityNormal} {
		env, err := danmaku.UnmarshalEnvelope(recs[i].Value)
		if err != nil {
			t.Fatal(err)
		}
		if env.Msg.Priority != want {
			t.Errorf("record %d: priority %v, want %v (%s)", i, env.Msg.Priority, want, recs[i].Value)
		}
		if mod := i == 0; env.Msg.Mod != mod { // the moderator's, only
			t.Errorf("record %d: mod %v, want %v (%s)", i, env.Msg.Mod, mod, recs[i].Value)
		}
		if i == 2 && env.Msg.UID != 1 {
			t.Errorf("admin send: uid %d, want the body's 1", env.Msg.UID)
		}
	}
	if n := e.counter(t, "danmaku_logic_high_priority_accepted_total"); n != 3 {
		t.Errorf("high_priority_accepted_total = %v, want 3", n)
	}

	// With auth off nobody may, whatever the body says.
	off := newEnv(t)
	r = off.doWith(t, http.MethodPost, "/logic/send", headers(), highBody(t, room, uid, 1))
	if d := r.errorBody(t); r.status != http.StatusForbidden || d.Code != danmaku.CodePriorityDenied {
		t.Fatalf("auth off: %d %s, want 403 priority_denied", r.status, r.body)
	}
	if n := off.counter(t, "danmaku_logic_send_refused_total"); n != 1 {
		t.Errorf("send_refused_total = %v, want 1 (priority)", n)
	}
}

// Bad priorities are 400 naming the field; a request of more high-priority
// messages than the room's burst is 400 naming messages.
func TestHighPriorityValidation(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *testEnv) { c.AdminSecret = prioAdminSecret; c.HighRateBurst = 3 })
	room := testkit.Uniq("r")
	for body, field := range map[string]string{
		`{"roomId":"` + room + `","userId":1,"userName":"sys","messages":[{"content":"x"}],"priority":2}`:      "priority",
		`{"roomId":"` + room + `","userId":1,"userName":"sys","messages":[{"content":"x"}],"priority":"high"}`: "priority",
		`{"roomId":"` + room + `","userId":1,"userName":"sys","messages":[{"content":"x"}],"priority":-1}`:     "priority",
		`{"roomId":"` + room + `","userId":1,"userName":"sys","messages":[{"content":"x"}],"priority":256}`:    "priority",
		`{"roomId":"` + room + `","userId":1,"userName":"sys","messages":[{"content":"x"}],"Priority":1}`:      "Priority",
		string(highBody(t, room, 1, 4)): "messages",
	} {
		r := e.doWith(t, http.MethodPost, "/logic/admin/send", headers("Authorization", "Bearer "+prioAdminSecret), []byte(body))
		if d := r.errorBody(t); r.status != http.StatusBadRequest || d.Field != field {
			t.Errorf("%s: %d %s, want 400 on %s", body, r.status, r.body, field)
		}
	}
}

// A room's high-priority messages are bounded by their own bucket, shared
// by every sender: beyond the burst a send is 429 with Retry-After, normal
// messages of the room and high ones of another room still pass, and a
// request refused by a later check (a mute) gives its tokens back.
func TestHighPriorityRateLimit(t *testing.T) {
	keys := tokens.New(t)
	e := newEnv(t, withAuth(keys.Verifier(t)), func(c *Config, _ *testEnv) {
		c.AdminSecret = prioAdminSecret
		c.HighRateLimit, c.HighRateBurst = 0.2, 3
	})
	room, other, uid := testkit.Uniq("r"), testkit.Uniq("r"), newUser()
	admin := headers("Authorization", "Bearer "+prioAdminSecret)
	mod := headers("Authorization", "Bearer "+roleToken(t, keys, uid, auth.RoleModerator))

	// A muted moderator's request is refused after the room's bucket was
	// checked; its tokens go back.
	if r := e.doWith(t, http.MethodPost, "/logic/admin/mute", admin, []byte(fmt.Sprintf(`{"userId":%d,"duration":"1m"}`, uid))); r.status != http.StatusOK {
		t.Fatalf("mute: %d %s", r.status, r.body)
	}
	if r := e.doWith(t, http.MethodPost, "/logic/send", mod, highBody(t, room, uid, 3)); r.status != http.StatusForbidden {
		t.Fatalf("muted moderator: %d %s", r.status, r.body)
	}
	if r := e.doWith(t, http.MethodPost, "/logic/admin/send", admin, highBody(t, room, 1, 2)); r.status != http.StatusAccepted {
		t.Fatalf("first two: %d %s", r.status, r.body)
	}
	if r := e.doWith(t, http.MethodPost, "/logic/admin/send", admin, highBody(t, room, 1, 1)); r.status != http.StatusAccepted {
		t.Fatalf("third: %d %s", r.status, r.body)
	}
	r := e.doWith(t, http.MethodPost, "/logic/admin/send", admin, highBody(t, room, 1, 1))
	if d := r.errorBody(t); r.status != http.StatusTooManyRequests || d.Code != danmaku.ERATELIMIT || d.Field != "priority" ||
		r.header.Get("Retry-After") == "" {
		t.Fatalf("fourth: %d %s (Retry-After %q), want 429 on priority", r.status, r.body, r.header.Get("Retry-After"))
	}
	if ra := r.header.Get("Retry-After"); ra != "5" {
		t.Errorf("Retry-After %s, want 5 (one token at 0.2 per second)", ra)
	}
	if r := e.doWith(t, http.MethodPost, "/logic/admin/send", admin, jsonBody(t, sendReq(room, 1, "normal"))); r.status != http.StatusAccepted {
		t.Fatalf("normal message of the room: %d %s", r.status, r.body)
	}
	if r := e.doWith(t, http.MethodPost, "/logic/admin/send", admin, highBody(t, other, 1, 3)); r.status != http.StatusAccepted {
		t.Fatalf("another room: %d %s", r.status, r.body)
	}
	if n := e.counter(t, "danmaku_logic_rate_limited_total"); n != 1 {
		t.Errorf("rate_limited_total = %v, want 1", n)
	}
}
