package comet

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// startWithAuth starts a comet with comet.auth jwt and a verifier of keys.
func startWithAuth(t *testing.T, keys *tokens.Keys) *Server {
	t.Helper()
	return startWithKeys(t, keys, func(c *Config) { c.Auth = config.AuthJWT })
}

func TestTokenAuth(t *testing.T) {
	keys := tokens.New(t)
	s := startWithAuth(t, keys)
	room := testkit.Uniq("r-")
	good := keys.Token(t, 42, "ann", nil)
	cases := []struct {
		name, query string
		header      string
		status      int
		code        string
	}{
		{"valid", "room=" + room + "&uid=42&token=" + good, "", http.StatusSwitchingProtocols, ""},
		{"valid without uid", "room=" + room + "&token=" + good, "", http.StatusSwitchingProtocols, ""},
		{"RS256", "room=" + room + "&token=" + keys.RS256(t, 42), "", http.StatusSwitchingProtocols, ""},
		{"Authorization header", "room=" + room, "Bearer " + good, http.StatusSwitchingProtocols, ""},
		{"no token", "room=" + room + "&uid=42", "", http.StatusUnauthorized, danmaku.EUNAUTH},
		{"other uid", "room=" + room + "&uid=43&token=" + good, "", http.StatusForbidden, danmaku.CodeForbidden},
	}
	for _, a := range keys.Attacks(t, 42) {
		cases = append(cases, struct {
			name, query string
			header      string
			status      int
			code        string
		}{a.Name, "room=" + room + "&token=" + a.Token, "", http.StatusUnauthorized, danmaku.EUNAUTH})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("Authorization", tc.header)
			}
			c, resp, err := wsviewer.TryDial(wsURL(s, tc.query), h)
			if resp == nil {
				t.Fatalf("no response: %v", err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if err == nil {
				defer c.Close()
				mustReadOp(t, c, opWelcome)
			} else {
				expectErrorBody(t, resp, tc.code)
			}
		})
	}
}

// A token's rooms claim bounds the rooms: the room of the URL and later
// joins outside it get a forbidden error frame and the viewer stays where
// it was (nowhere, or its room).
func TestTokenRooms(t *testing.T) {
	keys := tokens.New(t)
	s := startWithAuth(t, keys)
	pfx := testkit.Uniq("live")
	allowed, other := pfx+"-1", testkit.Uniq("other-")
	tok := keys.Token(t, 7, "", []string{pfx + "-*"})

	ws := mustDial(t, s, "room="+other+"&token="+tok)
	f := mustReadOp(t, ws, opError)
	if f.Code != codeForbidden {
		t.Fatalf("URL room outside the token: %+v, want code %s", f, codeForbidden)
	}
	mustSend(t, ws, map[string]string{"op": "join", "room": allowed})
	if f := mustReadOp(t, ws, opWelcome); f.Room != allowed {
		t.Fatalf("welcome %+v, want room %s", f, allowed)
	}
	mustSend(t, ws, map[string]string{"op": "join", "room": other})
	if f := mustReadOp(t, ws, opError); f.Code != codeForbidden {
		t.Fatalf("join outside the token: %+v", f)
	}
	// Still in the allowed room: its batches arrive.
	b := danmaku.Batch{Op: danmaku.OpMsgs, Room: allowed, Msgs: []danmaku.Message{{ID: testkit.Uniq("m"), UID: 1, Name: "a", Content: "hi", TS: 1}}}
	if n := s.Broadcast(b); n != 1 {
		t.Fatalf("broadcast to %s reached %d viewers, want 1", allowed, n)
	}
	if f := mustReadOp(t, ws, danmaku.OpMsgs); f.Room != allowed {
		t.Fatalf("batch %+v", f)
	}
}

// After its token expires a socket joins no more rooms: sub and join of a
// room of its stale rooms claim are answered token_expired and nothing
// reaches Redis; it keeps the rooms it holds (their batches arrive) and
// may leave them.
func TestExpiredTokenJoinsNoMore(t *testing.T) {
	keys := tokens.New(t)
	s := startWithAuth(t, keys)
	a, b := testkit.Uniq("exp"), testkit.Uniq("exp")
	exp := time.Now().Add(2 * time.Second)
	tok, err := auth.Mint(keys.Secret, auth.Claims{UID: 42, Rooms: []string{a, b}, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	ws := mustDial(t, s, "room="+a+"&token="+tok)
	mustReadOp(t, ws, opWelcome)
	time.Sleep(time.Until(exp) + 100*time.Millisecond)
	for _, op := range []string{"sub", "join"} {
		mustSend(t, ws, map[string]string{"op": op, "room": b})
		if f := mustReadOp(t, ws, opError); f.Code != codeTokenExpired || f.Room != b {
			t.Fatalf("%s after expiry: %+v, want %s", op, f, codeTokenExpired)
		}
	}
	n, err := s.rt.Online(context.Background(), b)
	if err != nil || n != 0 {
		t.Fatalf("room %s has %d viewers (%v), want 0", b, n, err)
	}
	if v := value(t, s.metrics.rejectedConns.WithLabelValues("token_expired")); v != 2 {
		t.Fatalf("token_expired counted %v, want 2", v)
	}
	m := danmaku.Batch{Op: danmaku.OpMsgs, Room: a, Msgs: []danmaku.Message{{ID: testkit.Uniq("m"), UID: 1, Name: "a", Content: "hi", TS: 1}}}
	if n := s.Broadcast(m); n != 1 {
		t.Fatalf("broadcast to the room held reached %d", n)
	}
	mustReadOp(t, ws, danmaku.OpMsgs)
	mustSend(t, ws, map[string]string{"op": "unsub", "room": a})
	mustReadOp(t, ws, opUnsubscribed)
}

// The origin check with allowed_origins empty (same host): the origin's
// scheme must be the request's, and a Host that is a DNS name (the shape of
// DNS rebinding: the attacker's name pointed at the comet, Host and Origin
// both naming it) passes only with allow_host_origin; listed origins
// match scheme and all.
func TestOriginCheck(t *testing.T) {
	plain, _ := mustStart(t, nil)
	named, _ := mustStart(t, func(c *Config) { c.AllowHostOrigin = true })
	listed, _ := mustStart(t, func(c *Config) { c.AllowedOrigins = []string{"https://good.example"} })
	port := func(s *Server) string { _, p, _ := net.SplitHostPort(s.PublicAddr()); return p }
	cases := []struct {
		name         string
		s            *Server
		host, origin string
		status       int
	}{
		{"same IP", plain, "", "http://127.0.0.1:" + port(plain), 101},
		{"localhost", plain, "localhost:" + port(plain), "http://localhost:" + port(plain), 101},
		{"no origin", plain, "", "", 101},
		{"https origin on plain http", plain, "", "https://127.0.0.1:" + port(plain), 403},
		{"other scheme", plain, "", "chrome-extension://127.0.0.1:" + port(plain), 403},
		{"null origin", plain, "", "null", 403},
		{"rebinding", plain, "attacker.example:" + port(plain), "http://attacker.example:" + port(plain), 403},
		{"rebinding allowed", named, "attacker.example:" + port(named), "http://attacker.example:" + port(named), 101},
		{"named, other scheme", named, "attacker.example:" + port(named), "https://attacker.example:" + port(named), 403},
		{"listed", listed, "", "https://good.example", 101},
		{"listed, other scheme", listed, "", "http://good.example", 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			if tc.host != "" {
				h.Set("Host", tc.host)
			}
			ws, resp, err := wsviewer.TryDial(wsURL(tc.s, ""), h)
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			if err == nil {
				ws.Close()
			}
			if status != tc.status {
				t.Fatalf("status %d (%v), want %d", status, err, tc.status)
			}
			if status == 403 {
				expectErrorBody(t, resp, danmaku.CodeForbidden)
			}
		})
	}
}

// The token's rooms claim is checked at every sub: a room outside it gets
// the error frame forbidden naming it, the connection keeps its rooms.
func TestTokenRoomsPerSub(t *testing.T) {
	keys := tokens.New(t)
	s := startWithAuth(t, keys)
	pfx := testkit.Uniq("live")
	other := testkit.Uniq("other-")
	ws := mustDial(t, s, "room="+pfx+"-1&room="+other+"&token="+keys.Token(t, 7, "", []string{pfx + "-*"}))
	if f := mustReadOp(t, ws, opWelcome); f.Room != pfx+"-1" {
		t.Fatalf("welcome %+v", f)
	}
	if f := mustReadOp(t, ws, opError); f.Code != codeForbidden || f.Room != other {
		t.Fatalf("URL room outside the token: %+v", f)
	}
	mustSend(t, ws, map[string]string{"op": "sub", "room": pfx + "-2"})
	if f := mustReadOp(t, ws, opWelcome); f.Room != pfx+"-2" {
		t.Fatalf("welcome %+v", f)
	}
	mustSend(t, ws, map[string]string{"op": "sub", "room": other})
	if f := mustReadOp(t, ws, opError); f.Code != codeForbidden || f.Room != other {
		t.Fatalf("sub outside the token: %+v", f)
	}
	for _, room := range []string{pfx + "-1", pfx + "-2"} {
		if n := s.Broadcast(batch(room, testkit.Uniq("m"))); n != 1 {
			t.Fatalf("broadcast to %s reached %d", room, n)
		}
		if f := mustReadOp(t, ws, danmaku.OpMsgs); f.Room != room {
			t.Fatalf("frame %+v, want room %s", f, room)
		}
	}
}
