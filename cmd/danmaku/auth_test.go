package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/config"
)

// The demo page with auth on at both doors: it gets its token from the
// development endpoint, connects and sends with it, and two pages of a room
// show each other's comments; a request without a token is refused.
func TestBrowserWithAuth(t *testing.T) {
	m := startMain(t, func(c *Config) { c.Logic.Auth, c.Comet.Auth = config.AuthJWT, config.AuthJWT })
	resp, err := http.Post(m.URL()+"logic/send", "application/json",
		strings.NewReader(`{"roomId":"lobby","userId":7,"userName":"x","messages":[{"content":"no token"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("send without a token: %d", resp.StatusCode)
	}
	browser := newBrowser(t)
	room := "auth_room"
	a := openPage(t, browser, m.URL(), room, true)
	b := openPage(t, browser, m.URL(), room, false)
	if tok := evalTo[string](t, a, `danmakuDemo.client.opts.token`); strings.Count(tok, ".") != 2 {
		t.Fatalf("the page has no token: %q", tok)
	}
	text := "signed comment " + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	sendFromPage(t, a, text)
	waitShows(t, a, "sender page", text)
	waitShows(t, b, "second page", text)
}

// send() retries a 503 and a request that got no answer with the same body,
// msgIds included, and gives up after sendRetries.
func TestBrowserSendRetries(t *testing.T) {
	m := startMain(t)
	var mu sync.Mutex
	var bodies []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		n := len(bodies)
		mu.Unlock()
		if n < 3 || strings.Contains(string(b), "always") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":"unavailable","message":"try again"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"msgIds":["a","b"]}`))
	}))
	defer api.Close()
	tab := openPage(t, newBrowser(t), m.URL(), "retry_room", true)
	client := `new DanmakuClient({baseUrl: "` + api.URL + `", token: "tok"})`
	got := evalTo[map[string]any](t, tab, client+`.send(["one", "two"], {userId: 5})
		.then(r => ({ids: r.msgIds.length}), e => ({code: e.code}))`)
	if got["ids"] != float64(2) {
		t.Fatalf("send after two 503s: %v", got)
	}
	mu.Lock()
	if len(bodies) != 3 || bodies[0] != bodies[1] || bodies[1] != bodies[2] {
		t.Fatalf("requests %q: want 3 identical", bodies)
	}
	var req struct {
		Messages []struct{ MsgID string }
	}
	json.Unmarshal([]byte(bodies[0]), &req)
	mu.Unlock()
	if len(req.Messages) != 2 || req.Messages[0].MsgID == "" || req.Messages[0].MsgID == req.Messages[1].MsgID {
		t.Fatalf("msgIds %+v: want one per comment, distinct", req.Messages)
	}
	// A send that keeps failing is tried 1 + sendRetries times, then
	// rejected with the server's error.
	mu.Lock()
	bodies = nil
	mu.Unlock()
	got = evalTo[map[string]any](t, tab, `new DanmakuClient({baseUrl: "`+api.URL+`", sendRetries: 2}).send("always", {userId: 5})
		.then(() => ({}), e => ({code: e.code, status: e.status}))`)
	mu.Lock()
	defer mu.Unlock()
	if got["status"] != float64(503) || len(bodies) != 3 {
		t.Fatalf("send that keeps failing: %v after %d requests, want 503 after 3", got, len(bodies))
	}
}
