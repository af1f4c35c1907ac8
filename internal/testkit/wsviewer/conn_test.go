package wsviewer

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// A Conn decodes each frame into its type, skips to an op, sends client
// frames and reports the close code, against a real WebSocket server that
// echoes the op of what it receives and closes with 4008 on "bye".
func TestConnFrames(t *testing.T) {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"welcome","connId":"c","room":"r","online":1,"heartbeatMs":30000,"epoch":"","pos":0}`))
		ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"online","room":"r","online":2}`))
		ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"msgs","room":"r","msgs":[{"id":"a","uid":1,"name":"n","content":"hi","ts":1}]}`))
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if strings.Contains(string(data), "bye") {
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4008, "slow"), time.Now().Add(time.Second))
				return
			}
			ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"pong"}`))
		}
	}))
	defer srv.Close()
	u := "ws" + strings.TrimPrefix(srv.URL, "http")
	c := DialConn(t, u, nil)
	if f := c.MustNext(t, time.Second); f.Welcome == nil || f.Welcome.ConnID != "c" {
		t.Fatalf("first frame %+v", f)
	}
	if f := c.NextOp(t, danmaku.OpMsgs, time.Second); len(f.Msgs.Msgs) != 1 || f.Msgs.Msgs[0].Content != "hi" {
		t.Fatalf("msgs frame %+v", f.Msgs)
	}
	c.MustSend(t, danmaku.ClientFrame{Op: danmaku.OpPing})
	if f := c.MustNext(t, time.Second); f.Op != danmaku.OpPong {
		t.Fatalf("answer to ping %+v", f)
	}
	if _, _, err := c.Next(50 * time.Millisecond); err == nil {
		t.Fatal("a frame nobody sent")
	}
	d := DialConn(t, u, nil)
	d.MustSend(t, `{"op":"bye"}`)
	d.ExpectClose(t, 4008, time.Second)
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer refuse.Close()
	if _, resp, err := TryDial("ws"+strings.TrimPrefix(refuse.URL, "http"), nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a refused handshake: %v", err)
	}
}
