package comet

import (
	"context"
	"net/http"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/route"
)

// startWithAuth starts a comet with comet.auth jwt and a verifier of keys.
func startWithAuth(t *testing.T, keys *tokens.Keys) *Server {
	t.Helper()
	cfg := testConfig(t)
	cfg.Auth = config.AuthJWT
	s, err := New(cfg, Deps{Store: route.New(redisserver.Client(t)), Verifier: keys.Verifier(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
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
			c, resp, err := websocket.DefaultDialer.Dial(wsURL(s, tc.query), h)
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
