package comet

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// Every answer of both listeners has the JSON error shape: unknown paths,
// job's /push asked on the public listener, and /ws without a WebSocket
// handshake (no library text).
func TestErrorsHaveOneShape(t *testing.T) {
	s, _ := mustStart(t, nil)
	for _, tc := range []struct {
		method, url string
		status      int
		code        string
	}{
		{"GET", "http://" + s.PublicAddr() + "/nope", 404, "not_found"},
		{"GET", "http://" + s.PublicAddr() + "/", 404, "not_found"},
		{"POST", "http://" + s.PublicAddr() + "/push", 404, "not_found"},
		{"GET", "http://" + s.PublicAddr() + "/ws", 400, "invalid_argument"},
		{"POST", "http://" + s.PublicAddr() + "/ws", 405, "method_not_allowed"},
		{"GET", "http://" + s.InternalAddr() + "/nope", 404, "not_found"},
	} {
		req, _ := http.NewRequest(tc.method, tc.url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %s", tc.method, tc.url, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if tc.status == 400 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "websocket:") || !strings.Contains(string(b), "not a WebSocket handshake") {
				t.Errorf("GET /ws without upgrade: %s", b)
			}
			continue
		}
		expectErrorBody(t, resp, tc.code)
	}
}

// HandlePublic mounts what the embedding binary serves next to /ws.
func TestHandlePublic(t *testing.T) {
	cfg := testConfig(t)
	s, err := New(cfg, Deps{Store: route.New(redisserver.Client(t))})
	if err != nil {
		t.Fatal(err)
	}
	s.HandlePublic("/page/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") }))
	hs := httptest.NewServer(s.PublicHandler())
	defer hs.Close()
	srv := hs.URL
	for path, want := range map[string]int{"/page/x": 200, "/other": 404} {
		resp, err := http.Get(srv + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// A bad room reads the same in the URL and in a join, and a frame of the
// wrong JSON type is explained without Go type names.
func TestFrameErrorTexts(t *testing.T) {
	s, _ := mustStart(t, nil)
	viaURL := mustReadOp(t, mustDial(t, s, "room=a:b"), opError)
	ws := mustDial(t, s, "")
	mustSend(t, ws, map[string]string{"op": "join", "room": "a:b"})
	viaJoin := mustReadOp(t, ws, opError)
	if viaURL.Code != codeBadRoom || viaURL.Message != viaJoin.Message || viaJoin.Code != codeBadRoom ||
		!strings.HasPrefix(viaURL.Message, "room: ") {
		t.Errorf("bad room: URL %+v, join %+v", viaURL, viaJoin)
	}
	// The raw socket: a frame whose op is no string.
	if err := ws.WS().WriteMessage(websocket.TextMessage, []byte(`{"op":5}`)); err != nil {
		t.Fatal(err)
	}
	f := mustReadOp(t, ws, opError)
	if f.Code != codeBadJSON || f.Message != "op must be a JSON string, not number" {
		t.Errorf("type error frame: %+v", f)
	}
}

// A text frame that is not UTF-8 closes the connection with 1007.
func TestInvalidUTF8TextFrameCloses1007(t *testing.T) {
	s, _ := mustStart(t, nil)
	ws := mustDial(t, s, "")
	// The raw socket: a text frame that is no UTF-8.
	if err := ws.WS().WriteMessage(websocket.TextMessage, []byte("{\"op\":\"ping\",\"x\":\"\xff\"}")); err != nil {
		t.Fatal(err)
	}
	expectClose(t, ws, websocket.CloseInvalidFramePayloadData)
}

// Viewers get their room's count over all comets in an online frame, so
// clients need not poll the API; only when it changed from what the viewer
// was told (in its welcome or an earlier frame).
func TestOnlineFrames(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) { c.OnlinePeriod = 64 * time.Millisecond })
	room := testkit.Uniq("r-")
	a := mustDial(t, s, "room="+room)
	mustReadOp(t, a, opWelcome)
	b := mustDial(t, s, "room="+room)
	if f := mustReadOp(t, b, opWelcome); f.Online != 2 {
		t.Fatalf("welcome %+v, want 2 online", f)
	}
	if f := mustReadOp(t, a, opOnline); f.Room != room || f.Online != 2 {
		t.Fatalf("online frame %+v, want 2 viewers of %s", f, room)
	}
	// The welcome told b the count, the frame told a: no frame repeats
	// it, so a's next frame is the count after b left.
	expectNoFrame(t, b, 10*s.cfg.OnlinePeriod)
	b.Close()
	if f := mustReadOp(t, a, opOnline); f.Online != 1 {
		t.Fatalf("online frame %+v after b left, want 1", f)
	}
}
