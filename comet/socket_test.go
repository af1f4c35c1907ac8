package comet

import (
	"crypto/tls"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// A ping whose length uses the 16-bit form reaches the comet over a real
// socket and is answered with its payload; the connection stays usable.
func TestExtendedLengthPing(t *testing.T) {
	s, _ := mustStart(t, nil)
	c := mustDial(t, s, "")
	pongs := make(chan string, 1)
	// The raw socket: control frames written byte by byte.
	c.WS().SetPongHandler(func(p string) error { pongs <- p; return nil })
	wire := append(maskedFrame16(0x9, []byte("ten bytes!")), maskedFrame(0x1, []byte(`{"op":"ping"}`))...)
	if _, err := c.WS().UnderlyingConn().Write(wire); err != nil {
		t.Fatal(err)
	}
	mustReadOp(t, c, opPong)
	if p := <-pongs; p != "ten bytes!" {
		t.Fatalf("pong payload %q", p)
	}
}

// A fragmented ping (FIN not set) is a protocol error (RFC 6455: control
// frames are never fragmented): it is not answered, the connection is
// closed with 1002.
func TestFragmentedPingCloses1002(t *testing.T) {
	s, _ := mustStart(t, nil)
	c := mustDial(t, s, "")
	pongs := make(chan string, 1)
	// The raw socket: a fragmented control frame.
	c.WS().SetPongHandler(func(p string) error { pongs <- p; return nil })
	frag := maskedFrame(0x9, []byte("part"))
	frag[0] &^= 0x80 // FIN off
	if _, err := c.WS().UnderlyingConn().Write(frag); err != nil {
		t.Fatal(err)
	}
	expectClose(t, c, websocket.CloseProtocolError)
	select {
	case p := <-pongs:
		t.Fatalf("the fragmented ping was answered (%q)", p)
	default:
	}
}

// When an embedding server terminates TLS the hijacked connection is not
// a socket: the viewer is served by serveFrames, with gorilla reading the
// connection directly, and the protocol is the same.
func TestServeFramesOverTLS(t *testing.T) {
	s, store := mustStart(t, nil)
	hs := httptest.NewTLSServer(s.PublicHandler())
	defer hs.Close()
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	url := "wss://" + strings.TrimPrefix(hs.URL, "https://") + "/ws?room="
	room := testkit.Uniq("tls-")

	c, _, err := d.Dial(url+room, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v := wsviewer.Wrap(c) // a TLS dialer of its own
	if w := mustReadOp(t, v, opWelcome); w.Room != room || w.Online != 1 {
		t.Fatalf("welcome %+v", w)
	}
	expectRoutes(t, store, s, room, 1)
	pongs := make(chan string, 1)
	c.SetPongHandler(func(p string) error { pongs <- p; return nil })
	if err := c.WriteControl(websocket.PingMessage, []byte("hb"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustSend(t, v, map[string]string{"op": "ping"})
	mustReadOp(t, v, opPong)
	if p := <-pongs; p != "hb" {
		t.Fatalf("pong payload %q", p)
	}
	mustSend(t, v, map[string]string{"op": "dance"})
	if f := mustReadOp(t, v, opError); f.Code != codeUnknownOp {
		t.Fatalf("error frame %+v", f)
	}
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	if n := mustPush(t, p, s, batch(room, "t1")); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
	if f := mustReadOp(t, v, danmaku.OpMsgs); f.Msgs[0].ID != "t1" {
		t.Fatalf("batch %+v", f)
	}
	c.Close()
	expectRoutes(t, store, s, room, 0)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if _, n := s.hub.counts(); n != 0 {
			return fmt.Errorf("%d connections left", n)
		}
		return nil
	})
}

// maskedFrame16 encodes a masked client frame with a 16-bit length field,
// whatever the payload length.
func maskedFrame16(opcode byte, payload []byte) []byte {
	key := [4]byte{0xa1, 0xb2, 0xc3, 0xd4}
	b := []byte{0x80 | opcode, 0x80 | 126, byte(len(payload) >> 8), byte(len(payload))}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i&3])
	}
	return b
}
