package logic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/internal/wordfilter"
)

// withAuth turns logic.auth on with verifier v.
func withAuth(v *auth.Verifier) envOption {
	return func(c *Config, e *testEnv) {
		c.Auth = config.AuthJWT
		e.verifier = v
	}
}

func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func headers(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// With auth on, the token says who sends: the body may leave the user
// out, the name is the token's, and the records carry both.
func TestSendWithToken(t *testing.T) {
	keys := tokens.New(t)
	e := newEnv(t, withAuth(keys.Verifier(t)))
	room, uid := testkit.Uniq("r"), newUser()
	body := jsonBody(t, map[string]any{"roomId": room, "userName": "forged", "messages": []any{map[string]string{"content": "hi", "msgId": "k"}}})

	r := e.doWith(t, http.MethodPost, "/logic/send", headers(), body)
	if r.status != http.StatusUnauthorized || r.errorBody(t).Code != danmaku.EUNAUTH {
		t.Fatalf("no token: %d %s", r.status, r.body)
	}
	r = e.doWith(t, http.MethodPost, "/logic/send", headers("Authorization", "Bearer "+keys.Token(t, uid, "Ann", nil)), body)
	if r.status != http.StatusAccepted || r.ids(t)[0] != fmt.Sprintf("u%d-k", uid) {
		t.Fatalf("with token: %d %s", r.status, r.body)
	}
	// A token without a name shows the user id.
	r = e.doWith(t, http.MethodPost, "/logic/send", headers("Authorization", "Bearer "+keys.Token(t, uid, "", nil)),
		jsonBody(t, sendReq(room, uid, "second")))
	if r.status != http.StatusAccepted {
		t.Fatalf("no name: %d %s", r.status, r.body)
	}
	got := readRoom(t, e, room, 2)
	for i, want := range []string{"Ann", fmt.Sprint(uid)} {
		env, err := danmaku.UnmarshalEnvelope(got[i].Value)
		if err != nil {
			t.Fatal(err)
		}
		if env.Msg.UID != uid || env.Msg.Name != want {
			t.Errorf("record %d: uid %d name %q, want %d %q", i, env.Msg.UID, env.Msg.Name, uid, want)
		}
	}
	for _, a := range keys.Attacks(t, uid) {
		r := e.doWith(t, http.MethodPost, "/logic/send", headers("Authorization", "Bearer "+a.Token), body)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s", a.Name, r.status, r.body)
		}
	}
}

// With auth off, rotating the body's userId from one client address ends
// at the address bucket.
func TestAddressBucketStopsRotation(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *testEnv) {
		c.IPRateLimit, c.IPRateBurst = 50, 250
		c.TrustedProxies = []string{"127.0.0.1"}
	})
	room := testkit.Uniq("r")
	ip := fmt.Sprintf("198.18.%d.%d", time.Now().UnixNano()%250, time.Now().UnixNano()/7%250)
	contents := make([]string, 50)
	for i := range contents {
		contents[i] = "x"
	}
	passed := 0
	var last response
	for i := 0; i < 20; i++ {
		last = e.doWith(t, http.MethodPost, "/logic/send", headers("X-Forwarded-For", "10.9.9.9, "+ip),
			jsonBody(t, sendReq(room, newUser(), contents...)))
		if last.status != http.StatusAccepted {
			break
		}
		passed++
	}
	if passed != 5 || last.status != http.StatusTooManyRequests || last.header.Get("Retry-After") == "" {
		t.Fatalf("%d requests of 50 from one address passed, then %d %s", passed, last.status, last.body)
	}
	if eb := last.errorBody(t); eb.Code != danmaku.ERATELIMIT || !strings.Contains(eb.Message, "address") {
		t.Fatalf("error %+v", eb)
	}
	// The refused requests did not spend their users' buckets: the users'
	// limit would allow a full burst for a fresh user from a fresh address.
	if n := e.counter(t, "danmaku_logic_send_refused_total"); n != 1 {
		t.Errorf("refused = %v, want 1", n)
	}
}

func TestClientIP(t *testing.T) {
	ps, err := parseProxies([]string{"10.0.0.0/8", "127.0.0.1", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		peer, xff, want string
	}{
		{"203.0.113.5:1234", "1.2.3.4", "203.0.113.5"},              // untrusted peer: its header is ignored
		{"127.0.0.1:1234", "", "127.0.0.1"},                         // trusted peer without header
		{"127.0.0.1:1234", "1.2.3.4", "1.2.3.4"},                    // one proxy
		{"127.0.0.1:1234", "6.6.6.6, 1.2.3.4, 10.1.1.1", "1.2.3.4"}, // client-written entries left of the last untrusted are ignored
		{"[::1]:1234", "2001:db8::1", "2001:db8::1"},
		{"127.0.0.1:1234", "10.1.1.1, 10.2.2.2", "10.1.1.1"}, // all trusted: the leftmost
		{"127.0.0.1:1234", "nonsense, 1.2.3.4", "1.2.3.4"},
		{"127.0.0.1:1234", "1.2.3.4, nonsense", "127.0.0.1"},
	}
	for _, tc := range cases {
		r := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := proxies(ps).clientIP(r); got != tc.want {
			t.Errorf("peer %s XFF %q: %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
	if _, err := parseProxies([]string{"10.0.0.0/8", "not-an-ip"}); err == nil || !strings.Contains(err.Error(), "trusted_proxies[1]") {
		t.Fatalf("bad entry: %v", err)
	}
}

func TestBlockedWordsMask(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *testEnv) {
		c.BlockedWords = wordfilter.Config{Mode: wordfilter.ModeMask, Words: []string{"darn"}}
	})
	room := testkit.Uniq("r")
	if r := e.send(t, sendReq(room, newUser(), "well DARN it")); r.status != http.StatusAccepted {
		t.Fatalf("%d %s", r.status, r.body)
	}
	env, err := danmaku.UnmarshalEnvelope(readRoom(t, e, room, 1)[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if env.Msg.Content != "well **** it" {
		t.Fatalf("content %q, want the word masked", env.Msg.Content)
	}
}

func TestAdminAPI(t *testing.T) {
	const secret = "admin-secret-0123456789"
	words := filepath.Join(t.TempDir(), "words.txt")
	if err := os.WriteFile(words, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config, _ *testEnv) {
		c.AdminSecret = secret
		c.BlockedWords = wordfilter.Config{Mode: wordfilter.ModeReject, File: words}
	})
	admin := func(path, bearer, body string) response {
		h := headers()
		if bearer != "" {
			h.Set("Authorization", "Bearer "+bearer)
		}
		return e.doWith(t, http.MethodPost, path, h, []byte(body))
	}
	room, uid := testkit.Uniq("r"), newUser()
	for _, bearer := range []string{"", "wrong", secret + "x"} {
		if r := admin("/logic/admin/mute", bearer, fmt.Sprintf(`{"userId":%d,"duration":"1m"}`, uid)); r.status != http.StatusUnauthorized {
			t.Fatalf("bearer %q: %d %s", bearer, r.status, r.body)
		}
	}
	if r := admin("/logic/admin/mute", secret, fmt.Sprintf(`{"userId":%d,"duration":"soon"}`, uid)); r.status != http.StatusBadRequest || r.errorBody(t).Field != "duration" {
		t.Fatalf("bad duration: %d %s", r.status, r.body)
	}
	// Muted everywhere, then unmuted.
	if r := admin("/logic/admin/mute", secret, fmt.Sprintf(`{"userId":%d,"duration":"1h","actor":"mod"}`, uid)); r.status != http.StatusOK {
		t.Fatalf("mute: %d %s", r.status, r.body)
	}
	if r := e.send(t, sendReq(room, uid, "hi")); r.status != http.StatusForbidden || r.errorBody(t).Code != "muted" {
		t.Fatalf("muted send: %d %s", r.status, r.body)
	}
	r := admin("/logic/admin/unmute", secret, fmt.Sprintf(`{"userId":%d}`, uid))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"removed":true`) {
		t.Fatalf("unmute: %d %s", r.status, r.body)
	}
	if r := e.send(t, sendReq(room, uid, "hi")); r.status != http.StatusAccepted {
		t.Fatalf("after unmute: %d %s", r.status, r.body)
	}
	// The word list is read again on request.
	if err := os.WriteFile(words, []byte("first\nsecond\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.send(t, sendReq(room, uid, "a second try")); r.status != http.StatusAccepted {
		t.Fatalf("before reload: %d %s", r.status, r.body)
	}
	if r := admin("/logic/admin/words/reload", secret, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"words":2`) {
		t.Fatalf("reload: %d %s", r.status, r.body)
	}
	if r := e.send(t, sendReq(room, uid, "a second try")); r.status != http.StatusBadRequest || r.errorBody(t).Code != danmaku.CodeBlocked {
		t.Fatalf("after reload: %d %s", r.status, r.body)
	}
	if n := e.counter(t, "danmaku_logic_admin_actions_total"); n != 7 {
		t.Errorf("admin actions counted %v, want 7 (3 refused, 1 failed, 3 done)", n)
	}

	// Without a secret the API is off for everybody.
	off := newEnv(t)
	if r := off.doWith(t, http.MethodPost, "/logic/admin/mute", headers("Authorization", "Bearer "+secret), []byte(`{}`)); r.status != http.StatusForbidden {
		t.Fatalf("API off: %d %s", r.status, r.body)
	}
}

// With auth off the body's userId namespaces msgIds, so a client claiming
// user 42 takes 42's key first and 42's own send with it gets the same id
// (202, deduplicated by job: never shown). Documented in
// docs/integrate.md; logic.auth jwt namespaces keys by the token instead
// (TestSendWithToken).
func TestMsgIDSquatWithAuthOff(t *testing.T) {
	e := newEnv(t)
	room, victim := testkit.Uniq("r"), newUser()
	squat := e.send(t, SendRequest{RoomID: room, UserID: victim, UserName: "mallory", Messages: []SendMessage{{Content: "squatted", MsgID: "k1"}}})
	own := e.send(t, SendRequest{RoomID: room, UserID: victim, UserName: "ann", Messages: []SendMessage{{Content: "the real one", MsgID: "k1"}}})
	want := fmt.Sprintf("u%d-k1", victim)
	if squat.status != http.StatusAccepted || own.status != http.StatusAccepted || squat.ids(t)[0] != want || own.ids(t)[0] != want {
		t.Fatalf("squat %d %s, own %d %s; want both 202 with %s", squat.status, squat.body, own.status, own.body, want)
	}
}
