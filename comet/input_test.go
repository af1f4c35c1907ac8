package comet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// TestBadInput sends every kind of bad input while a healthy viewer stays
// connected; each gets its documented answer and the healthy viewer keeps
// receiving batches.
func TestBadInput(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) {
		c.MaxFrameBytes = 256
		c.AllowedOrigins = []string{"https://good.example"}
	})
	room, other := testkit.Uniq("r-"), testkit.Uniq("other-")
	healthy := mustDial(t, s, "room="+room)
	mustReadOp(t, healthy, opWelcome)
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	seq := 0
	stillServing := func(t *testing.T) {
		t.Helper()
		seq++
		id := "ok" + string(rune('a'+seq))
		if n := mustPush(t, p, s, batch(room, id)); n != 1 {
			t.Fatalf("delivered %d, want 1", n)
		}
		if f := mustReadOp(t, healthy, danmaku.OpMsgs); f.Msgs[0].ID != id {
			t.Fatalf("healthy viewer got %v", msgIDs(f))
		}
	}

	frameCases := []struct {
		name  string
		frame string
		code  string
	}{
		{"invalid JSON", `{"op":`, codeBadJSON},
		{"not an object", `[1,2]`, codeBadJSON},
		{"unknown op", `{"op":"dance"}`, codeUnknownOp},
		{"missing op", `{"room":"x"}`, codeUnknownOp},
		{"bad room", `{"op":"join","room":"a:b"}`, codeBadRoom},
		{"empty room", `{"op":"join","room":""}`, codeBadRoom},
	}
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustDial(t, s, "room="+other)
			mustReadOp(t, c, opWelcome)
			// The raw socket: frames no well-behaved viewer sends.
			if err := c.WS().WriteMessage(websocket.TextMessage, []byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
			if f := mustReadOp(t, c, opError); f.Code != tc.code || f.Message == "" {
				t.Fatalf("error frame %+v, want code %s", f, tc.code)
			}
			// The connection is still usable.
			mustSend(t, c, map[string]string{"op": "ping"})
			mustReadOp(t, c, opPong)
			stillServing(t)
		})
	}

	t.Run("binary frame", func(t *testing.T) {
		c := mustDial(t, s, "")
		// The raw socket: a binary frame.
		if err := c.WS().WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if f := mustReadOp(t, c, opError); f.Code != codeBadFrame {
			t.Fatalf("error frame %+v", f)
		}
		stillServing(t)
	})

	t.Run("bad room in query", func(t *testing.T) {
		c := mustDial(t, s, "room=bad%20room")
		if f := mustReadOp(t, c, opError); f.Code != codeBadRoom {
			t.Fatalf("error frame %+v", f)
		}
		// Still open: a valid join works.
		mustSend(t, c, map[string]string{"op": "join", "room": other})
		mustReadOp(t, c, opWelcome)
		stillServing(t)
	})

	t.Run("oversized frame", func(t *testing.T) {
		c := mustDial(t, s, "room="+other)
		mustReadOp(t, c, opWelcome)
		big := `{"op":"join","room":"` + strings.Repeat("a", 1000) + `"}`
		// The raw socket: a frame over the read limit.
		if err := c.WS().WriteMessage(websocket.TextMessage, []byte(big)); err != nil {
			t.Fatal(err)
		}
		expectClose(t, c, websocket.CloseMessageTooBig)
		stillServing(t)
	})

	t.Run("wrong origin", func(t *testing.T) {
		h := http.Header{"Origin": {"https://evil.example"}}
		_, resp, err := wsviewer.TryDial(wsURL(s, "room="+other), h)
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("dial with bad origin: %v %v", err, resp)
		}
		expectErrorBody(t, resp, danmaku.CodeForbidden)
		h = http.Header{"Origin": {"https://good.example"}}
		c, _, err := wsviewer.TryDial(wsURL(s, "room="+other), h)
		if err != nil {
			t.Fatalf("dial with allowed origin: %v", err)
		}
		defer c.Close()
		mustReadOp(t, c, opWelcome)
		stillServing(t)
	})

	t.Run("bad uid", func(t *testing.T) {
		_, resp, err := wsviewer.TryDial(wsURL(s, "room="+room+"&uid=a*b"), nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("dial with bad uid: %v", err)
		}
		expectErrorBody(t, resp, danmaku.EINVALID)
	})

	t.Run("wrong push secret", func(t *testing.T) {
		bad := push.NewClient("not-the-secret", 2*time.Second)
		defer bad.Close()
		body, _ := json.Marshal(batch(room, "x"))
		_, err := bad.Push(context.Background(), s.AdvertiseAddr(), body)
		if danmaku.ErrorCode(err) != danmaku.EUNAUTH {
			t.Fatalf("push with wrong secret: %v", err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.InternalAddr()+"/push", bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
		expectErrorBody(t, resp, danmaku.EUNAUTH)
		stillServing(t)
	})

	t.Run("bad push body", func(t *testing.T) {
		for _, body := range []string{
			`not json`,
			`{"op":"msgs","room":"a:b","msgs":[]}`,
			`{"op":"other","room":"r","msgs":[]}`,
			`{"op":"msgs","room":"r","msgs":[{"id":""}]}`,
			`{"op":"msgs","room":"r","msgs":[]} {}`,
			`{"op":"msgs","room":"r","msgs":[{"id":"` + strings.Repeat("x", 5<<20) + `"}]}`,
		} {
			_, err := p.Push(context.Background(), s.AdvertiseAddr(), []byte(body))
			if danmaku.ErrorCode(err) != danmaku.EINVALID {
				t.Fatalf("body %.40q: got %v, want invalid_argument", body, err)
			}
		}
		stillServing(t)
	})

	t.Run("push to a dead comet", func(t *testing.T) {
		_, err := p.Push(context.Background(), "127.0.0.1:1", []byte(`{}`))
		if danmaku.ErrorCode(err) != danmaku.EUNAVAILABLE {
			t.Fatalf("got %v, want unavailable", err)
		}
	})

	t.Run("healthz and metrics", func(t *testing.T) {
		for _, u := range []string{"http://" + s.PublicAddr() + "/healthz", "http://" + s.InternalAddr() + "/healthz", "http://" + s.InternalAddr() + "/metrics"} {
			resp, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: status %d", u, resp.StatusCode)
			}
			if strings.HasSuffix(u, "/metrics") && !strings.Contains(string(b), "danmaku_comet_slow_consumer_disconnects_total") {
				t.Fatalf("metrics lack comet metrics:\n%s", b)
			}
		}
	})
}

func expectErrorBody(t *testing.T, resp *http.Response, code string) {
	t.Helper()
	defer resp.Body.Close()
	var eb httpx.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatalf("decode error body: %v", err)
	}
	if eb.Error.Code != code || eb.Error.Message == "" {
		t.Fatalf("error body %+v, want code %s", eb, code)
	}
}

func TestPerIPLimit(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) { c.MaxConnsPerIP = 2 })
	a := mustDial(t, s, "")
	mustDial(t, s, "")
	_, resp, err := wsviewer.TryDial(wsURL(s, ""), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third connection: %v", err)
	}
	expectErrorBody(t, resp, danmaku.ERATELIMIT)
	// A slot frees when a connection ends.
	a.Close()
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		c, _, err := wsviewer.TryDial(wsURL(s, ""), nil)
		if err != nil {
			return err
		}
		c.Close()
		return nil
	})
}

func TestParseFrame(t *testing.T) {
	cases := []struct {
		in   string
		want clientFrame
		code string
	}{
		{`{"op":"ping"}`, clientFrame{Op: "ping"}, ""},
		{` {"op":"join","room":"video_123"} `, clientFrame{Op: "join", Room: "video_123"}, ""},
		{`{"op":"join","room":"x","extra":1}`, clientFrame{Op: "join", Room: "x"}, ""},
		{`{"op":"join"}`, clientFrame{}, codeBadRoom},
		{`{"op":"join","room":"{x}"}`, clientFrame{}, codeBadRoom},
		{`{"op":"join","room":5}`, clientFrame{}, codeBadJSON},
		{`{"op":"nope"}`, clientFrame{}, codeUnknownOp},
		{`null`, clientFrame{}, codeBadJSON},
		{``, clientFrame{}, codeBadJSON},
	}
	for _, tc := range cases {
		got, err := parseFrame([]byte(tc.in))
		code := ""
		var fe *frameError
		if errors.As(err, &fe) {
			code = fe.Code
		}
		if !reflect.DeepEqual(got, tc.want) || code != tc.code {
			t.Errorf("parseFrame(%q) = %+v, %v; want %+v, code %q", tc.in, got, err, tc.want, tc.code)
		}
	}
}

func FuzzParseFrame(f *testing.F) {
	f.Add([]byte(`{"op":"join","room":"video_123"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := parseFrame(b)
		if err != nil {
			var fe *frameError
			if !errors.As(err, &fe) || fe.Code == "" {
				t.Fatalf("error %v is not a frameError with a code", err)
			}
			if !reflect.DeepEqual(fr, clientFrame{}) {
				t.Fatalf("frame %+v returned with error", fr)
			}
			return
		}
		switch fr.Op {
		case opPing:
		case opJoin:
			if danmaku.CheckID("room", fr.Room) != nil {
				t.Fatalf("accepted bad room %q", fr.Room)
			}
		default:
			t.Fatalf("accepted op %q", fr.Op)
		}
	})
}

// maskedFrame encodes one client frame.
func maskedFrame(opcode byte, payload []byte) []byte {
	key := [4]byte{0x11, 0x22, 0x33, 0x44}
	b := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	default:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i&3])
	}
	return b
}

// Frames arriving together in one segment, control frames between them,
// and a frame split over two segments are all served in order.
func TestPipelinedFrames(t *testing.T) {
	s, _ := mustStart(t, nil)
	room := testkit.Uniq("r-")
	c := mustDial(t, s, "")
	pongs := make(chan string, 4)
	// The raw socket: control frames and frames written byte by byte.
	c.WS().SetPongHandler(func(p string) error { pongs <- p; return nil })

	var wire []byte
	wire = append(wire, maskedFrame(0x9, []byte("hb1"))...)
	wire = append(wire, maskedFrame(0x1, []byte(`{"op":"ping"}`))...)
	wire = append(wire, maskedFrame(0xA, nil)...) // unsolicited pong: ignored
	wire = append(wire, maskedFrame(0x1, []byte(`{"op":"join","room":"`+room+`"}`))...)
	split := maskedFrame(0x1, []byte(`{"op":"ping"}`))
	wire = append(wire, split[:3]...)
	if _, err := c.WS().UnderlyingConn().Write(wire); err != nil {
		t.Fatal(err)
	}
	mustReadOp(t, c, opPong) // the control pong is handled while reading
	if p := <-pongs; p != "hb1" {
		t.Fatalf("pong payload %q", p)
	}
	if f := mustReadOp(t, c, opWelcome); f.Room != room {
		t.Fatalf("welcome %+v", f)
	}
	time.Sleep(20 * time.Millisecond) // let the half frame sit alone
	if _, err := c.WS().UnderlyingConn().Write(split[3:]); err != nil {
		t.Fatal(err)
	}
	mustReadOp(t, c, opPong)
}

// A comet that accepts the connection but never answers costs a push at
// most the Pusher's timeout, as an unavailable error.
func TestPusherTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	p := push.NewClient(testSecret, 200*time.Millisecond)
	defer p.Close()
	start := time.Now()
	_, err = p.Push(context.Background(), ln.Addr().String(), []byte(`{}`))
	if danmaku.ErrorCode(err) != danmaku.EUNAVAILABLE {
		t.Fatalf("got %v, want unavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("push to a stalled comet took %v", d)
	}
}
