package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// The role binaries refuse to start with the shipped placeholder secrets
// or a short one, with exit status 2 and the setting named.
func TestPlaceholderSecretsRefusedAtStart(t *testing.T) {
	cases := []struct {
		name, want string
		args       []string
	}{
		{"job", "job.push_secret", []string{"-config", "configs/job.yaml"}},
		{"comet", "comet.secret", []string{"-config", "configs/comet.yaml"}},
		{"comet", "comet.secret", []string{"-config", "configs/comet.yaml", "-comet.secret", "too-short"}},
		{"logic", "logic.admin_secret", []string{"-config", "configs/logic.yaml", "-logic.admin_secret", "change-me-admin-secret"}},
		{"logic", "auth.hmac_secret", []string{"-config", "configs/logic.yaml", "-logic.auth", "jwt"}},
	}
	for _, tc := range cases {
		p := start(t, tc.name, tc.args...)
		select {
		case <-p.Done():
		case <-time.After(15 * time.Second):
			t.Fatalf("%s %v still running", tc.name, tc.args)
		}
		var ee *exec.ExitError
		if !errors.As(p.Err(), &ee) || ee.ExitCode() != 2 || !strings.Contains(p.Logs(), tc.want) {
			t.Errorf("%s %v: exit %v, output %q; want status 2 naming %s", tc.name, tc.args, p.Err(), p.Logs(), tc.want)
		}
	}
}

// secureRoles runs logic, job and comet with auth on: logic and comet
// verify tokens of keys, logic trusts 127.0.0.1 as a proxy (so each case
// picks its client address with X-Forwarded-For), guards the admin API with
// adminSecret, rejects the blocked word "badword" and cuts history answers
// at 16 KiB.
type secureRoles struct {
	keys              *tokens.Keys
	logicURL, cometWS string
}

const adminSecret = "admin-secret-of-the-test"

func startSecureRoles(t *testing.T) *secureRoles {
	redis := redisserver.Standalone(t).Addr
	kafka := stack.DevKafka(t)
	keys := tokens.New(t)
	logicAddr, cometAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	secret := "secure-test-push-secret"
	authArgs := []string{"-redis.addrs", redis, "-auth.hmac_secret", string(keys.Secret), "-auth.public_keys", keys.PublicPEM}
	logic := start(t, "logic", append(authArgs, "-config", "configs/logic.yaml", "-kafka.brokers", kafka,
		"-logic.listen", logicAddr, "-logic.auth", "jwt", "-logic.admin_secret", adminSecret,
		"-logic.trusted_proxies", "127.0.0.1/32", "-logic.blocked_words.mode", "reject",
		"-logic.blocked_words.words", "badword", "-logic.history_max_bytes", "16384")...)
	start(t, "job", "-config", "configs/job.yaml", "-redis.addrs", redis, "-kafka.brokers", kafka,
		"-job.metrics_addr", testkit.FreeAddr(t), "-job.push_secret", secret, "-job.window", "50ms")
	start(t, "comet", append(authArgs, "-config", "configs/comet.yaml", "-comet.listen", cometAddr,
		"-comet.internal_listen", testkit.FreeAddr(t), "-comet.secret", secret, "-comet.auth", "jwt")...)
	r := &secureRoles{keys: keys, logicURL: "http://" + logicAddr, cometWS: "ws://" + cometAddr + "/ws"}
	getOK(t, r.logicURL+"/readyz")
	getOK(t, "http://"+cometAddr+"/healthz")
	if strings.Contains(logic.Logs(), "senders are not authenticated") {
		t.Error("logic with auth on says senders are not authenticated")
	}
	return r
}

type answer struct {
	status int
	header http.Header
	body   []byte
	Error  struct{ Code, Field, Message string }
	MsgIDs []string
}

// post sends body to path with an optional bearer token, from the client
// address ip (X-Forwarded-For through the trusted local proxy).
func (r *secureRoles) post(t *testing.T, path, bearer, ip, body string) answer {
	t.Helper()
	return r.do(t, http.MethodPost, path, bearer, ip, body)
}

// get reads path of logic with an optional bearer token, from the client
// address ip.
func (r *secureRoles) get(t *testing.T, path, bearer, ip string) answer {
	t.Helper()
	return r.do(t, http.MethodGet, path, bearer, ip, "")
}

func (r *secureRoles) do(t *testing.T, method, path, bearer, ip, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, r.logicURL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("X-Forwarded-For", ip)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Error  struct{ Code, Field, Message string }
		MsgIDs []string
	}
	json.Unmarshal(b, &a)
	return answer{status: resp.StatusCode, header: resp.Header, body: b, Error: a.Error, MsgIDs: a.MsgIDs}
}

func sendBody(room string, uid int64, msgID string, contents ...string) string {
	var msgs []string
	for _, c := range contents {
		m := `{"content":"` + c + `"`
		if msgID != "" {
			m += `,"msgId":"` + msgID + `"`
		}
		msgs = append(msgs, m+"}")
	}
	user := ""
	if uid != 0 {
		user = fmt.Sprintf(`"userId":%d,`, uid)
	}
	return `{"roomId":"` + room + `",` + user + `"messages":[` + strings.Join(msgs, ",") + `]}`
}

func expect(t *testing.T, what string, a answer, status int, code string) {
	t.Helper()
	if a.status != status || a.Error.Code != code {
		t.Fatalf("%s: %d %q, want %d %q", what, a.status, a.Error.Code, status, code)
	}
}

func many(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i)
	}
	return out
}

// Every attack of the threat list against the running role binaries with
// auth on, and its answer.
func TestAttacksOnTheRoleBinaries(t *testing.T) {
	r := startSecureRoles(t)
	k := r.keys
	room := testkit.Uniq("sec_")

	t.Run("tokens at /logic/send", func(t *testing.T) {
		expect(t, "no token", r.post(t, "/logic/send", "", "192.0.2.1", sendBody(room, 42, "", "x")), 401, "unauthenticated")
		for _, a := range k.Attacks(t, 42) {
			expect(t, a.Name, r.post(t, "/logic/send", a.Token, "192.0.2.1", sendBody(room, 0, "", "x")), 401, "unauthenticated")
		}
		limited := k.Token(t, 42, "ann", []string{room})
		expect(t, "room not in rooms", r.post(t, "/logic/send", limited, "192.0.2.1", sendBody(room+"x", 0, "", "x")), 403, "permission_denied")
		expect(t, "RS256", r.post(t, "/logic/send", k.RS256(t, 42), "192.0.2.1", sendBody(room, 0, "", "x")), 202, "")
	})
	t.Run("tokens at /ws", func(t *testing.T) {
		for _, a := range k.Attacks(t, 42) {
			_, resp, err := wsviewer.TryDial(r.cometWS+"?room="+room+"&token="+a.Token, nil)
			if err == nil || resp == nil || resp.StatusCode != 401 {
				t.Fatalf("%s: %v %v, want 401", a.Name, resp, err)
			}
		}
		ws, _, err := wsviewer.TryDial(r.cometWS+"?room=elsewhere&token="+k.Token(t, 42, "", []string{room}), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if _, data, err := ws.NextRaw(10 * time.Second); err != nil || !strings.Contains(string(data), `"code":"forbidden"`) {
			t.Fatalf("join outside the token's rooms: %s %v", data, err)
		}
	})
	t.Run("reads of a room", func(t *testing.T) {
		for _, path := range []string{"/logic/history?roomId=" + room, "/logic/online?roomId=" + room} {
			expect(t, path+" without a token", r.get(t, path, "", "192.0.2.30"), 401, "unauthenticated")
			for _, a := range k.Attacks(t, 42) {
				expect(t, path+" "+a.Name, r.get(t, path, a.Token, "192.0.2.30"), 401, "unauthenticated")
			}
			other := r.get(t, path, k.Token(t, 42, "", []string{room + "x"}), "192.0.2.30")
			expect(t, path+" outside the token's rooms", other, 403, "permission_denied")
			if other.Error.Field != "roomId" {
				t.Errorf("%s: field %q, want roomId", path, other.Error.Field)
			}
			expect(t, path+" with a token for the room", r.get(t, path, k.Token(t, 42, "", []string{room}), "192.0.2.30"), 200, "")
		}
	})
	t.Run("history flood", r.checkHistoryFlood)
	t.Run("impersonation", func(t *testing.T) {
		a := r.post(t, "/logic/send", k.Token(t, 666, "mallory", nil), "192.0.2.2", sendBody(room, 1, "", "I am the admin"))
		expect(t, "body userId of another user", a, 403, "permission_denied")
		if a.Error.Field != "userId" {
			t.Errorf("field %q, want userId", a.Error.Field)
		}
	})
	t.Run("squatting", func(t *testing.T) {
		viewer, _, err := wsviewer.TryDial(r.cometWS+"?room="+room+"&token="+k.Token(t, 9, "", nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer viewer.Close()
		if _, data, err := viewer.NextRaw(10 * time.Second); err != nil || !strings.Contains(string(data), `"op":"welcome"`) {
			t.Fatalf("welcome: %s %v", data, err)
		}
		squat := r.post(t, "/logic/send", k.Token(t, 666, "mallory", nil), "192.0.2.3", sendBody(room, 0, "u42-k1", "squatted"))
		expect(t, "attacker's key", squat, 202, "")
		if squat.MsgIDs[0] != "u666-u42-k1" {
			t.Fatalf("the attacker's key became %q, want it inside the attacker's namespace", squat.MsgIDs[0])
		}
		own := r.post(t, "/logic/send", k.Token(t, 42, "ann", nil), "192.0.2.4", sendBody(room, 42, "k1", "the real one"))
		expect(t, "victim's key", own, 202, "")
		if own.MsgIDs[0] != "u42-k1" {
			t.Fatalf("victim's id %q", own.MsgIDs[0])
		}
		end := time.Now().Add(30 * time.Second)
		for {
			_, data, err := viewer.NextRaw(time.Until(end))
			if err != nil {
				t.Fatalf("the victim's message did not arrive: %v", err)
			}
			if s := string(data); strings.Contains(s, `"id":"u42-k1"`) {
				if !strings.Contains(s, `"uid":42,"name":"ann","content":"the real one"`) {
					t.Fatalf("u42-k1 shows %s", s)
				}
				break
			}
		}
	})
	t.Run("lock-out", func(t *testing.T) {
		mallory := k.Token(t, 666, "mallory", nil)
		for i := 0; i < 3; i++ {
			expect(t, "draining user 43", r.post(t, "/logic/send", mallory, "192.0.2.5", sendBody(room, 43, "", many(50)...)), 403, "permission_denied")
		}
		expect(t, "user 43's full burst", r.post(t, "/logic/send", k.Token(t, 43, "bob", nil), "192.0.2.6", sendBody(room, 0, "", many(50)...)), 202, "")
	})
	t.Run("rotation", func(t *testing.T) {
		var last answer
		accepted := 0
		for uid := int64(1000); uid < 1010; uid++ {
			last = r.post(t, "/logic/send", k.Token(t, uid, "", nil), "203.0.113.7", sendBody(room, 0, "", many(50)...))
			if last.status != 202 {
				break
			}
			accepted++
		}
		expect(t, "tenth user from one address", last, 429, "rate_limited")
		if accepted != 5 || last.header.Get("Retry-After") == "" {
			t.Fatalf("%d requests of 50 passed from one address (want 5 = ip_rate_burst 250), Retry-After %q", accepted, last.header.Get("Retry-After"))
		}
		expect(t, "another address", r.post(t, "/logic/send", k.Token(t, 1011, "", nil), "203.0.113.8", sendBody(room, 0, "", "x")), 202, "")
	})
	t.Run("admin secret", func(t *testing.T) {
		body := `{"userId":44,"duration":"1m"}`
		expect(t, "no secret", r.post(t, "/logic/admin/mute", "", "192.0.2.7", body), 401, "unauthenticated")
		expect(t, "wrong secret", r.post(t, "/logic/admin/mute", adminSecret+"x", "192.0.2.7", body), 401, "unauthenticated")
		expect(t, "a user token", r.post(t, "/logic/admin/mute", k.Token(t, 44, "", nil), "192.0.2.7", body), 401, "unauthenticated")
	})
	t.Run("mute", func(t *testing.T) {
		tok := k.Token(t, 45, "carol", nil)
		expect(t, "mute", r.post(t, "/logic/admin/mute", adminSecret, "192.0.2.8",
			`{"userId":45,"roomId":"`+room+`","duration":"2s","actor":"mod-1"}`), 200, "")
		expect(t, "muted send", r.post(t, "/logic/send", tok, "192.0.2.9", sendBody(room, 0, "", "hi")), 403, "muted")
		inRoom := r.post(t, "/logic/send", tok, "192.0.2.9", sendBody(room, 0, "", "hi"))
		if !strings.Contains(inRoom.Error.Message, "in this room") {
			t.Errorf("a room mute says %q", inRoom.Error.Message)
		}
		expect(t, "other room", r.post(t, "/logic/send", tok, "192.0.2.9", sendBody(room+"b", 0, "", "hi")), 202, "")
		expect(t, "mute everywhere", r.post(t, "/logic/admin/mute", adminSecret, "192.0.2.8",
			`{"userId":45,"duration":"1s","actor":"mod-1"}`), 200, "")
		everywhere := r.post(t, "/logic/send", tok, "192.0.2.9", sendBody(room+"b", 0, "", "hi"))
		expect(t, "muted everywhere", everywhere, 403, "muted")
		if !strings.Contains(everywhere.Error.Message, "everywhere") || strings.Contains(everywhere.Error.Message, "this room") {
			t.Errorf("a mute of every room says %q", everywhere.Error.Message)
		}
		testkit.SucceedsSoon(t, 10*time.Second, func() error {
			if a := r.post(t, "/logic/send", tok, "192.0.2.9", sendBody(room, 0, "", "hi")); a.status != 202 {
				return fmt.Errorf("after the mute: %d %s", a.status, a.Error.Code)
			}
			return nil
		})
	})
	t.Run("ban", r.checkBan)
	t.Run("delete", r.checkDelete)
	t.Run("unicode", func(t *testing.T) {
		for i, c := range []struct{ what, name, content, code, field string }{
			{"zero-width space", "", "bad\u200bword", "content_blocked", "messages[0].content"},
			{"soft hyphen", "", "bad\u00adword", "content_blocked", "messages[0].content"},
			{"full width", "", "ｂａｄｗｏｒｄ", "content_blocked", "messages[0].content"},
			{"cyrillic look-alikes", "", "bаdwоrd", "content_blocked", "messages[0].content"},
			{"combining marks", "", "b\u0336a\u0336d\u0336word", "content_blocked", "messages[0].content"},
			{"name with a hidden word", "bad\u200bword", "hi", "content_blocked", "userName"},
			{"invisible comment", "", "\u200b\u2060\ufeff", "invalid_argument", "messages[0].content"},
			{"invisible name", "\u200b\u3164", "hi", "invalid_argument", "userName"},
			{"right-to-left override in a name", "\u202enimda", "hi", "invalid_argument", "userName"},
		} {
			tok := k.Token(t, int64(70+i), c.name, nil)
			a := r.post(t, "/logic/send", tok, fmt.Sprintf("192.0.2.%d", 70+i), sendBody(room, 0, "", c.content))
			expect(t, c.what, a, 400, c.code)
			if a.Error.Field != c.field {
				t.Errorf("%s: field %q, want %s", c.what, a.Error.Field, c.field)
			}
		}
	})
	t.Run("ambiguous bodies", func(t *testing.T) {
		tok := k.Token(t, 80, "", nil)
		for _, c := range []struct{ what, body, field string }{
			{"a second roomId", `{"roomId":"` + room + `","roomId":"elsewhere","messages":[{"content":"x"}]}`, "roomId"},
			{"ROOMID", `{"ROOMID":"` + room + `","messages":[{"content":"x"}]}`, "ROOMID"},
			{"a second content", `{"roomId":"` + room + `","messages":[{"content":"shown","content":"hidden"}]}`, "messages[0].content"},
		} {
			a := r.post(t, "/logic/send", tok, "192.0.2.80", c.body)
			expect(t, c.what, a, 400, "invalid_argument")
			if a.Error.Field != c.field {
				t.Errorf("%s: field %q, want %s", c.what, a.Error.Field, c.field)
			}
		}
		big := r.post(t, "/logic/send", k.Token(t, 1<<53, "", nil), "192.0.2.81", sendBody(room, 0, "", "x"))
		expect(t, "user id 2^53", big, 400, "invalid_argument")
		if big.Error.Field != "userId" {
			t.Errorf("user id 2^53: field %q", big.Error.Field)
		}
	})
	t.Run("delete of ids that never existed", func(t *testing.T) {
		room := testkit.Uniq("nodel_")
		ws := r.dialAs(t, room, 90, "")
		readOp(t, ws, "welcome")
		del := `{"roomId":"` + room + `","ids":["u9-never","06h02t59h3tna000"],"actor":"mod-3"}`
		expect(t, "delete", r.post(t, "/logic/admin/delete", adminSecret, "192.0.2.90", del), 404, "not_found")
		expect(t, "send", r.post(t, "/logic/send", k.Token(t, 91, "", nil), "192.0.2.91", sendBody(room, 0, "", "after")), 202, "")
		for {
			f, err := next(t, ws, 20*time.Second)
			if err != nil {
				t.Fatalf("waiting for the message: %v", err)
			}
			if f.Op == "del" {
				t.Fatalf("viewers got a del for ids that never existed: %+v", f)
			}
			if f.Op == "msgs" {
				break
			}
		}
	})
	t.Run("blocked word", func(t *testing.T) {
		a := r.post(t, "/logic/send", k.Token(t, 46, "", nil), "192.0.2.10", sendBody(room, 0, "", "fine", "so BadWord here"))
		expect(t, "blocked word", a, 400, "content_blocked")
		if a.Error.Field != "messages[1].content" {
			t.Fatalf("field %q", a.Error.Field)
		}
	})
}

// The all-in-one serves the development token endpoint only with the
// secret it made itself at start (and says so loudly); with an operator's
// secret, which role binaries may share, /dev/token does not exist and
// the page does not ask for it.
func TestDevTokenOnlyWithGeneratedSecret(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		endpoint bool
	}{
		{"configured secret", []string{"-auth.hmac_secret", "an-operators-real-secret-of-32-bytes!"}, false},
		{"generated secret", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := testkit.FreeAddr(t)
			p := start(t, "danmaku", append([]string{"-logic.listen", addr, "-logic.auth", "jwt", "-comet.auth", "jwt"}, tc.args...)...)
			getOK(t, "http://"+addr+"/readyz")
			resp, err := http.Get("http://" + addr + "/dev/token?uid=42&name=mallory")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			page := string(getOK(t, "http://"+addr+"/"))
			loud := strings.Contains(p.Logs(), "DEVELOPMENT MODE")
			if tc.endpoint {
				if resp.StatusCode != 200 || !strings.Contains(string(b), `"token"`) || !strings.Contains(page, "danmaku-dev-token") || !loud {
					t.Fatalf("generated secret: /dev/token %d %s, page meta %v, loud log %v", resp.StatusCode, b, strings.Contains(page, "danmaku-dev-token"), loud)
				}
				return
			}
			if resp.StatusCode != 404 || strings.Contains(string(b), "token\":") || strings.Contains(page, "danmaku-dev-token") || loud {
				t.Fatalf("configured secret: /dev/token %d %s (want 404), page meta %v, loud log %v", resp.StatusCode, b, strings.Contains(page, "danmaku-dev-token"), loud)
			}
		})
	}
}

// With logic.admin_addr the admin API, the notices and /metrics are served
// on their own listener only: the public one answers 404 for them, so an
// edge that proxies all of /logic/ cannot expose them.
func TestAdminAPIOnItsOwnListener(t *testing.T) {
	redis := redisserver.Standalone(t).Addr
	kafka := stack.DevKafka(t)
	public, admin := testkit.FreeAddr(t), testkit.FreeAddr(t)
	start(t, "logic", "-config", "configs/logic.yaml", "-redis.addrs", redis, "-kafka.brokers", kafka,
		"-logic.listen", public, "-logic.admin_addr", admin, "-logic.admin_secret", adminSecret)
	getOK(t, "http://"+public+"/readyz")
	getOK(t, "http://"+admin+"/healthz")
	pub := &secureRoles{logicURL: "http://" + public}
	adm := &secureRoles{logicURL: "http://" + admin}
	mute := `{"userId":44,"duration":"1m"}`
	notice := `{"userId":44,"messages":[{"content":"hi"}]}`
	send := `{"roomId":"lobby","userId":7,"userName":"ann","messages":[{"content":"hi"}]}`
	expect(t, "mute on the public listener", pub.post(t, "/logic/admin/mute", adminSecret, "192.0.2.40", mute), 404, "not_found")
	expect(t, "push on the public listener", pub.post(t, "/logic/push/user", adminSecret, "192.0.2.40", notice), 404, "not_found")
	if a := pub.get(t, "/metrics", "", "192.0.2.40"); a.status != 404 {
		t.Fatalf("/metrics on the public listener: %d, want 404", a.status)
	}
	expect(t, "send on the public listener", pub.post(t, "/logic/send", "", "192.0.2.40", send), 202, "")
	expect(t, "mute on the admin listener", adm.post(t, "/logic/admin/mute", adminSecret, "192.0.2.40", mute), 200, "")
	expect(t, "push on the admin listener", adm.post(t, "/logic/push/user", adminSecret, "192.0.2.40", notice), 202, "")
	if b := getOK(t, "http://"+admin+"/metrics"); !strings.Contains(string(b), "danmaku_logic_admin_actions_total") {
		t.Fatalf("/metrics on the admin listener lacks logic's metrics")
	}
	expect(t, "send on the admin listener", adm.post(t, "/logic/send", "", "192.0.2.40", send), 404, "not_found")
}

// checkHistoryFlood reads a room of 150 long messages as the attack did
// (limit=1000, again and again from one address): each answer holds at
// most logic.history_max_bytes of messages and says more, the pages add up
// to the whole history, and the address gets 429 with Retry-After after
// its burst while another address still reads.
func (r *secureRoles) checkHistoryFlood(t *testing.T) {
	room := testkit.Uniq("hist_")
	long := strings.Repeat("x", 190)
	for i := 0; i < 3; i++ {
		tok := r.keys.Token(t, int64(60+i), "reader", []string{room})
		expect(t, "send", r.post(t, "/logic/send", tok, fmt.Sprintf("192.0.2.%d", 60+i), sendBody(room, 0, "", slices.Repeat([]string{long}, 50)...)), 202, "")
	}
	tok := r.keys.Token(t, 63, "", []string{room})
	type page struct {
		Pos, Through int64
		More         bool
		Messages     []struct{ Pos int64 }
	}
	read := func(ip string, since int64) (answer, page) {
		a := r.get(t, fmt.Sprintf("/logic/history?roomId=%s&limit=1000&since=%d", room, since), tok, ip)
		var p page
		json.Unmarshal(a.body, &p)
		return a, p
	}
	poll := 0
	testkit.SucceedsSoon(t, 30*time.Second, func() error {
		poll++
		if _, p := read(fmt.Sprintf("198.51.100.%d", poll%250), 0); p.Pos != 150 {
			return fmt.Errorf("history at %d of 150", p.Pos)
		}
		return nil
	})
	var got []int64
	for since, pages := int64(0), 0; ; pages++ {
		a, p := read("203.0.113.50", since)
		expect(t, "page", a, 200, "")
		if len(a.body) > 16384+512 {
			t.Fatalf("an answer of %d bytes, want at most history_max_bytes 16384 and the envelope", len(a.body))
		}
		for _, m := range p.Messages {
			got = append(got, m.Pos)
		}
		if !p.More {
			break
		}
		if p.Through <= since || pages > 10 {
			t.Fatalf("page from %d: through %d, more %v", since, p.Through, p.More)
		}
		since = p.Through
	}
	if len(got) != 150 || got[0] != 1 || got[149] != 150 {
		t.Fatalf("pages hold %d messages (%v...), want positions 1..150", len(got), got[:min(len(got), 3)])
	}
	var limited answer
	for i := 0; i < 40 && limited.status == 0; i++ {
		if a, _ := read("203.0.113.51", 0); a.status != 200 {
			limited = a
		}
	}
	expect(t, "the flood", limited, 429, "rate_limited")
	if limited.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	a, _ := read("203.0.113.52", 0)
	expect(t, "another address", a, 200, "")
}

// cometRoles runs logic, job and two comets on one Redis of their own:
// open has comet.auth off (the default) with keys, so a viewer may prove
// its uid with a token; strict has comet.auth jwt with the same keys.
type cometRoles struct {
	secureRoles    // keys and logicURL (logic has auth off); cometWS unused
	rdb            *redis.Client
	open, strict   *proc
	openWS, openIn string // open's /ws URL and internal address
	strictWS       string
}

func startCometRoles(t *testing.T) *cometRoles {
	rs := redisserver.New(t)
	kafka := stack.DevKafka(t)
	keys := tokens.New(t)
	logicAddr, openAddr, openIn, strictAddr := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	secret := "comet-attacks-push-secret"
	start(t, "logic", "-config", "configs/logic.yaml", "-redis.addrs", rs.Addr, "-kafka.brokers", kafka,
		"-logic.listen", logicAddr, "-logic.admin_secret", adminSecret)
	start(t, "job", "-config", "configs/job.yaml", "-redis.addrs", rs.Addr, "-kafka.brokers", kafka,
		"-job.metrics_addr", testkit.FreeAddr(t), "-job.push_secret", secret, "-job.window", "50ms")
	comet := func(listen, internal string, extra ...string) *proc {
		return start(t, "comet", append([]string{"-config", "configs/comet.yaml", "-log.level", "debug",
			"-redis.addrs", rs.Addr, "-auth.hmac_secret", string(keys.Secret), "-comet.listen", listen,
			"-comet.internal_listen", internal, "-comet.secret", secret}, extra...)...)
	}
	r := &cometRoles{secureRoles: secureRoles{keys: keys, logicURL: "http://" + logicAddr},
		open: comet(openAddr, openIn), strict: comet(strictAddr, testkit.FreeAddr(t), "-comet.auth", "jwt"),
		openWS: "ws://" + openAddr + "/ws", openIn: openIn, strictWS: "ws://" + strictAddr + "/ws"}
	r.rdb = redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { r.rdb.Close() })
	getOK(t, r.logicURL+"/readyz")
	getOK(t, "http://"+openAddr+"/healthz")
	getOK(t, "http://"+strictAddr+"/healthz")
	return r
}

func dialWS(t *testing.T, url string, h http.Header) *wsviewer.Conn {
	t.Helper()
	return wsviewer.DialConn(t, url, h)
}

func redisCommands(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no total_commands_processed in INFO stats")
	return 0
}

// The comet's attacks (auth off unless said): each against the running
// binaries, with the answer the fix gives.
func TestCometAttacks(t *testing.T) {
	r := startCometRoles(t)
	k := r.keys
	t.Run("user notices to a claimed uid", func(t *testing.T) {
		room := testkit.Uniq("h2_")
		thief := dialWS(t, r.openWS+"?room="+room+"&uid=4242", nil)
		owner := dialWS(t, r.openWS+"?room="+room+"&token="+k.Token(t, 4242, "", nil), nil)
		readOp(t, thief, "welcome")
		readOp(t, owner, "welcome")
		expect(t, "push to user 4242", r.post(t, "/logic/push/user", adminSecret, "",
			`{"userId":4242,"messages":[{"content":"your address: 1 Main St"}]}`), 202, "")
		if f := readOp(t, owner, "user"); len(f.Msgs) != 1 {
			t.Fatalf("owner got %+v", f)
		}
		// The room's online count may come; the user's notice must not.
		for deadline := time.Now().Add(time.Second); time.Until(deadline) > 0; {
			_, b, err := thief.NextRaw(time.Until(deadline))
			if err != nil {
				break
			}
			if !strings.Contains(string(b), `"op":"online"`) {
				t.Fatalf("a viewer claiming uid 4242 without a token got %s", b)
			}
		}
	})
	t.Run("room op flood", r.flood)
	t.Run("stale token", func(t *testing.T) {
		a, b := testkit.Uniq("l1_"), testkit.Uniq("l1_")
		exp := time.Now().Add(2 * time.Second)
		tok, err := auth.Mint(k.Secret, auth.Claims{UID: 77, Rooms: []string{a, b}, ExpiresAt: exp})
		if err != nil {
			t.Fatal(err)
		}
		ws := dialWS(t, r.strictWS+"?room="+a+"&token="+tok, nil)
		readOp(t, ws, "welcome")
		time.Sleep(time.Until(exp) + 200*time.Millisecond)
		ws.Send(danmaku.ClientFrame{Op: danmaku.OpSub, Room: b})
		if f := readOp(t, ws, "error"); f.Code != "token_expired" || f.Room != b {
			t.Fatalf("sub after the token expired: %+v", f)
		}
	})
	t.Run("resume beyond the head", func(t *testing.T) {
		room := testkit.Uniq("l3_")
		v1 := dialWS(t, r.openWS+"?room="+room, nil)
		readOp(t, v1, "welcome")
		expect(t, "send", r.post(t, "/logic/send", "", "192.0.2.30", `{"roomId":"`+room+`","userId":5,"userName":"eve","messages":[{"content":"one"},{"content":"two"}]}`), 202, "")
		f := readOp(t, v1, "msgs")
		head := f.Msgs[len(f.Msgs)-1].Pos
		v2 := dialWS(t, fmt.Sprintf("%s?room=%s&since=%d&epoch=%s", r.openWS, room, head+100, f.Epoch), nil)
		if w := readOp(t, v2, "welcome"); w.Recovered == nil || *w.Recovered || w.Pos != head {
			t.Fatalf("resume from %d with the head at %d: %+v, want recovered:false at %d", head+100, head, w, head)
		}
		expect(t, "send", r.post(t, "/logic/send", "", "192.0.2.30", `{"roomId":"`+room+`","userId":5,"userName":"eve","messages":[{"content":"three"}]}`), 202, "")
		for {
			if f := readOp(t, v2, "msgs"); f.Msgs[len(f.Msgs)-1].Pos == head+1 {
				break
			}
		}
	})
	t.Run("too many rooms in the URL", func(t *testing.T) {
		var q []string
		for i := range 300 {
			q = append(q, fmt.Sprintf("room=%s%d", testkit.Uniq("l6_"), i))
		}
		ws := dialWS(t, r.openWS+"?"+strings.Join(q, "&"), nil)
		if f := readOp(t, ws, "error"); f.Code != "too_many_rooms" {
			t.Fatalf("error frame %+v", f)
		}
		ws.Send(danmaku.ClientFrame{Op: danmaku.OpPing})
		readOp(t, ws, "pong") // one error frame, not a cut (4008)
	})
	t.Run("origin", func(t *testing.T) {
		host := strings.TrimPrefix(strings.TrimSuffix(r.openWS, "/ws"), "ws://")
		_, port, _ := net.SplitHostPort(host)
		for name, h := range map[string]http.Header{
			"DNS rebinding": {"Host": {"attacker.example:" + port}, "Origin": {"http://attacker.example:" + port}},
			"other scheme":  {"Origin": {"https://" + host}},
		} {
			_, resp, err := wsviewer.TryDial(r.openWS, h)
			if err == nil || resp == nil || resp.StatusCode != 403 {
				t.Fatalf("%s: %v %v, want 403", name, resp, err)
			}
		}
	})
	t.Run("fragmented ping", func(t *testing.T) {
		ws := dialWS(t, r.openWS, nil)
		frame := []byte{0x09, 0x80, 1, 2, 3, 4} // ping, FIN off, masked, empty
		ws.WS().UnderlyingConn().Write(frame)   // the raw socket: a frame no client library writes
		_, _, err := ws.NextRaw(10 * time.Second)
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseProtocolError {
			t.Fatalf("after a fragmented ping: %v, want close 1002", err)
		}
	})
	t.Run("tokens stay out of the logs", func(t *testing.T) {
		good := k.Token(t, 78, "", nil)
		dialWS(t, r.strictWS+"?room=x&token="+good, nil)
		for _, a := range k.Attacks(t, 78) {
			wsviewer.TryDial(r.strictWS+"?room=x&token="+a.Token, nil)
		}
		for _, p := range []*proc{r.open, r.strict} {
			logs := p.Logs()
			for _, tok := range append([]string{good}, strings.Split(good, ".")[2]) {
				if strings.Contains(logs, tok) {
					t.Fatalf("%s logged a token", p.Name)
				}
			}
		}
	})
}

// flood is the op flood: 16 sockets from one address alternate join a /
// join b as fast as the network takes them for 3 s. The comet refuses
// what exceeds each socket's budget (rate_limited with retryAfterMs,
// counted), so Redis sees a few thousand commands, not hundreds of
// thousands.
func (r *cometRoles) flood(t *testing.T) {
	a, b := testkit.Uniq("m1_"), testkit.Uniq("m1_")
	var limited, sent atomic.Int64
	var wg sync.WaitGroup
	before := redisCommands(t, r.rdb)
	stop := time.Now().Add(3 * time.Second)
	for range 16 {
		ws := dialWS(t, r.openWS, nil)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				room := a
				if i%2 == 1 {
					room = b
				}
				if ws.Send(danmaku.ClientFrame{Op: danmaku.OpJoin, Room: room}) != nil {
					return
				}
				sent.Add(1)
				if i%2 == 1 {
					time.Sleep(time.Millisecond) // ~600 pairs a second a socket at most
				}
			}
		}()
		go func() {
			defer wg.Done()
			for {
				sf, _, err := ws.Next(time.Until(stop.Add(2 * time.Second)))
				if err != nil {
					return
				}
				if f := sf.Error; f != nil && f.Code == "rate_limited" && f.RetryAfterMs > 0 {
					limited.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	cmds := redisCommands(t, r.rdb) - before
	t.Logf("%d ops sent, %d refused rate_limited, %d Redis commands", sent.Load(), limited.Load(), cmds)
	if limited.Load() == 0 || cmds > 15000 {
		t.Fatalf("%d ops sent: %d refused, %d Redis commands; want refusals and at most 15000 commands", sent.Load(), limited.Load(), cmds)
	}
	m := string(getOK(t, "http://"+r.openIn+"/metrics"))
	if !strings.Contains(m, "danmaku_comet_ops_rate_limited_total") || strings.Contains(m, "danmaku_comet_ops_rate_limited_total 0\n") {
		t.Fatal("ops_rate_limited_total not counted")
	}
}
