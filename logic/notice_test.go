package logic

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
)

// A push to a user is one record per message, keyed by the user, with the
// notice's content, compacted data and server time; a client msgId is
// namespaced by the user and a resend gets the same id.
func TestPushUser(t *testing.T) {
	e, admin := adminEnv(t)
	uid := newUser()
	before := time.Now().UnixMilli()
	body := fmt.Sprintf(`{"userId":%d,"messages":[{"content":"your gift arrived","data":{ "gift" : "rose" }},{"data":{"n":1},"msgId":"k1"}]}`, uid)
	r := admin("/logic/push/user", body)
	if r.status != http.StatusAccepted {
		t.Fatalf("push: %d %s", r.status, r.body)
	}
	ids := r.ids(t)
	if len(ids) != 2 || ids[0] == "" || ids[1] != fmt.Sprintf("to%d-k1", uid) {
		t.Fatalf("ids %v", ids)
	}
	recs := readRoom(t, e, danmaku.UserKey(fmt.Sprint(uid)), 2)
	for i, rec := range recs {
		env, err := danmaku.UnmarshalEnvelope(rec.Value)
		if err != nil || env.Notice == nil || env.User != fmt.Sprint(uid) || env.All || env.Notice.ID != ids[i] || env.Notice.TS < before {
			t.Fatalf("record %d: %+v %v", i, env, err)
		}
	}
	first, _ := danmaku.UnmarshalEnvelope(recs[0].Value)
	if first.Notice.Content != "your gift arrived" || string(first.Notice.Data) != `{"gift":"rose"}` {
		t.Fatalf("first notice %+v (data %s)", first.Notice, first.Notice.Data)
	}
	again := admin("/logic/push/user", fmt.Sprintf(`{"userId":%d,"messages":[{"content":"x","msgId":"%s"}]}`, uid, ids[1]))
	if again.status != http.StatusAccepted || again.ids(t)[0] != ids[1] {
		t.Fatalf("resend with the namespaced id: %d %s", again.status, again.body)
	}
	if n := e.counter(t, "danmaku_logic_notices_accepted_total"); n != 3 {
		t.Errorf("notices counted %v, want 3", n)
	}
}

// A broadcast is keyed apart from every room and user.
func TestBroadcast(t *testing.T) {
	e, admin := adminEnv(t)
	r := admin("/logic/broadcast", `{"messages":[{"content":"maintenance at 3:00","msgId":"m1"}]}`)
	if r.status != http.StatusAccepted || r.ids(t)[0] != "all-m1" {
		t.Fatalf("broadcast: %d %s", r.status, r.body)
	}
	var found bool
	for _, rec := range readRoom(t, e, danmaku.BroadcastKey, 1) {
		env, err := danmaku.UnmarshalEnvelope(rec.Value)
		if err != nil || env.Notice == nil || !env.All || env.User != "" {
			t.Fatalf("broadcast record: %+v %v", env, err)
		}
		found = found || env.Notice.ID == "all-m1" && env.Notice.Content == "maintenance at 3:00"
	}
	if !found {
		t.Fatal("broadcast record not found")
	}
}

// Both routes need the admin secret: 401 without it or with a wrong one,
// 403 while the admin API is off; nothing reaches Kafka then.
func TestNoticesNeedTheAdminSecret(t *testing.T) {
	const secret = "admin-secret-0123456789"
	e := newEnv(t, func(c *Config, _ *testEnv) { c.AdminSecret = secret })
	off := newEnv(t)
	body := []byte(`{"userId":7,"messages":[{"content":"x"}]}`)
	for _, path := range []string{"/logic/push/user", "/logic/broadcast"} {
		for _, bearer := range []string{"", "wrong", secret + "x"} {
			h := headers("Content-Type", "application/json")
			if bearer != "" {
				h.Set("Authorization", "Bearer "+bearer)
			}
			if r := e.doWith(t, http.MethodPost, path, h, body); r.status != http.StatusUnauthorized || r.errorBody(t).Field != "Authorization" {
				t.Errorf("%s with bearer %q: %d %s, want 401", path, bearer, r.status, r.body)
			}
		}
		h := headers("Content-Type", "application/json", "Authorization", "Bearer "+secret)
		if r := off.doWith(t, http.MethodPost, path, h, body); r.status != http.StatusForbidden {
			t.Errorf("%s with the admin API off: %d %s, want 403", path, r.status, r.body)
		}
	}
	if n := e.counter(t, "danmaku_logic_notices_accepted_total"); n != 0 {
		t.Errorf("notices accepted %v, want 0", n)
	}
}

// Bad input is a 400 naming the field (413, 415 and 405 as for a send).
func TestNoticeValidation(t *testing.T) {
	e, admin := adminEnv(t)
	msgs := func(n int) string {
		return `[` + strings.TrimSuffix(strings.Repeat(`{"content":"x"},`, n), ",") + `]`
	}
	bigData := `{"k":"` + repeat("a", MaxNoticeData) + `"}`
	cases := []struct{ path, body, field string }{
		{"/logic/push/user", `{"messages":[{"content":"x"}]}`, "userId"},
		{"/logic/push/user", `{"userId":0,"messages":[{"content":"x"}]}`, "userId"},
		{"/logic/push/user", `{"userId":"7","messages":[{"content":"x"}]}`, "userId"},
		{"/logic/push/user", `{"userId":7}`, "messages"},
		{"/logic/push/user", `{"userId":7,"messages":[]}`, "messages"},
		{"/logic/push/user", `{"userId":7,"messages":` + msgs(51) + `}`, "messages"},
		{"/logic/push/user", `{"userId":7,"messages":[{}]}`, "messages[0].content"},
		{"/logic/push/user", `{"userId":7,"messages":[{"content":"x"},{"data":null}]}`, "messages[1].content"},
		{"/logic/push/user", `{"userId":7,"messages":[{"content":"  "}]}`, "messages[0].content"},
		{"/logic/push/user", `{"userId":7,"messages":[{"content":"` + repeat("x", 201) + `"}]}`, "messages[0].content"},
		{"/logic/push/user", `{"userId":7,"messages":[{"data":[1]}]}`, "messages[0].data"},
		{"/logic/push/user", `{"userId":7,"messages":[{"data":"text"}]}`, "messages[0].data"},
		{"/logic/push/user", `{"userId":7,"messages":[{"data":` + bigData + `}]}`, "messages[0].data"},
		{"/logic/push/user", `{"userId":7,"messages":[{"content":"x","extra":1}]}`, "messages[0].extra"},
		{"/logic/push/user", `{"userId":7,"roomId":"r","messages":[{"content":"x"}]}`, "roomId"},
		{"/logic/push/user", `{"userId":7,"messages":[{"content":"x","msgId":"a:b"}]}`, "messages[0].msgId"},
		{"/logic/push/user", `{"userId":7,"messages":[{"content":"x","msgId":"k"},{"content":"y","msgId":"k"}]}`, "messages[1].msgId"},
		{"/logic/push/user", `{"userId":7,"messages":[{"content":"x"}]`, "body"},
		{"/logic/push/user", `{"userId":7,"messages":[{"content":"x"}]} {}`, "body"},
		{"/logic/broadcast", `{"userId":7,"messages":[{"content":"x"}]}`, "userId"},
		{"/logic/broadcast", `{"messages":[]}`, "messages"},
		{"/logic/broadcast", `{"messages":[{"content":"x","msgId":"` + repeat("k", 61) + `"}]}`, "messages[0].msgId"},
	}
	for _, tc := range cases {
		r := admin(tc.path, tc.body)
		if r.status != http.StatusBadRequest || r.errorBody(t).Code != danmaku.EINVALID || r.errorBody(t).Field != tc.field {
			t.Errorf("%s %.80s: %d %s, want 400 naming %s", tc.path, tc.body, r.status, r.body, tc.field)
		}
	}
	const secret = "admin-secret-0123456789"
	auth := headers("Authorization", "Bearer "+secret, "Content-Type", "text/plain")
	if r := e.doWith(t, http.MethodPost, "/logic/broadcast", auth, []byte(`{"messages":[{"content":"x"}]}`)); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d %s", r.status, r.body)
	}
	if r := admin("/logic/broadcast", `{"messages":[{"content":"`+repeat("x", 70<<10)+`"}]}`); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("large body: %d %s", r.status, r.body)
	}
	if r := e.doWith(t, http.MethodGet, "/logic/push/user", headers("Authorization", "Bearer "+secret), nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d %s", r.status, r.body)
	}
	if n := e.counter(t, "danmaku_logic_notices_accepted_total"); n != 0 {
		t.Errorf("notices accepted %v, want 0", n)
	}
}
