package wsviewer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// Conn is a viewer read frame by frame: one WebSocket connection to a
// comet that never reconnects and records nothing, for tests that check
// each frame a comet sends, the frames a viewer may send and how the
// connection ends. Frames are decoded into danmaku.ServerFrame.
type Conn struct {
	ws *websocket.Conn
}

// TryDial connects to wsURL (a comet's /ws URL with its query) with the
// request headers h; the response is that of the refused handshake on an
// error (nil when there was none).
func TryDial(wsURL string, h http.Header) (*Conn, *http.Response, error) {
	ws, resp, err := dialer.Dial(wsURL, h)
	if err != nil {
		return nil, resp, err
	}
	return &Conn{ws: ws}, resp, nil
}

// DialConn connects to wsURL with the request headers h (may be nil);
// failing fails tb. The connection is closed when tb ends.
func DialConn(tb testing.TB, wsURL string, h http.Header) *Conn {
	tb.Helper()
	c, resp, err := TryDial(wsURL, h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		tb.Fatalf("dial %s: %v (status %d)", wsURL, err, status)
	}
	tb.Cleanup(c.Close)
	return c
}

// WS is the underlying connection, for tests whose point is what a
// well-behaved viewer never sends (malformed or binary frames, control
// frames, a half-written frame) or the socket itself.
func (c *Conn) WS() *websocket.Conn { return c.ws }

// Close closes the connection without a close frame (a network drop).
func (c *Conn) Close() { c.ws.Close() }

// NextRaw returns the next data frame within d: its message type and
// bytes.
func (c *Conn) NextRaw(d time.Duration) (int, []byte, error) {
	c.ws.SetReadDeadline(time.Now().Add(d))
	return c.ws.ReadMessage()
}

// Next returns the next frame within d, decoded; a binary frame is an
// error. The bytes are returned too, for the tests that look at the wire.
func (c *Conn) Next(d time.Duration) (danmaku.ServerFrame, []byte, error) {
	mt, data, err := c.NextRaw(d)
	if err != nil {
		return danmaku.ServerFrame{}, nil, err
	}
	if mt != websocket.TextMessage {
		return danmaku.ServerFrame{}, data, fmt.Errorf("frame type %d, want text", mt)
	}
	var f danmaku.ServerFrame
	if err := json.Unmarshal(data, &f); err != nil {
		return f, data, fmt.Errorf("decode frame %q: %v", data, err)
	}
	return f, data, nil
}

// MustNext is Next failing tb on an error.
func (c *Conn) MustNext(tb testing.TB, d time.Duration) danmaku.ServerFrame {
	tb.Helper()
	f, _, err := c.Next(d)
	if err != nil {
		tb.Fatalf("read frame: %v", err)
	}
	return f
}

// NextOp skips frames until one of op arrives within d; an error or the
// deadline fails tb.
func (c *Conn) NextOp(tb testing.TB, op string, d time.Duration) danmaku.ServerFrame {
	tb.Helper()
	end := time.Now().Add(d)
	for {
		f, data, err := c.Next(time.Until(end))
		if err != nil {
			tb.Fatalf("waiting for a %s frame: %v (last %.200s)", op, err, data)
		}
		if f.Op == op {
			return f
		}
	}
}

// Send writes a client frame: v encoded as JSON (a danmaku.ClientFrame),
// or a string or []byte as it is, as a text frame.
func (c *Conn) Send(v any) error {
	var data []byte
	switch v := v.(type) {
	case string:
		data = []byte(v)
	case []byte:
		data = v
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			return err
		}
	}
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// MustSend is Send failing tb on an error.
func (c *Conn) MustSend(tb testing.TB, v any) {
	tb.Helper()
	if err := c.Send(v); err != nil {
		tb.Fatalf("send %v: %v", v, err)
	}
}

// CloseCode reads until the connection ends, within d, and returns the
// code of the close frame the comet sent (-1: it ended without one;
// frames read meanwhile are skipped).
func (c *Conn) CloseCode(d time.Duration) (int, error) {
	end := time.Now().Add(d)
	for {
		_, _, err := c.NextRaw(time.Until(end))
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, nil
		}
		return -1, err
	}
}

// ExpectClose reads until the connection ends, within d, and fails tb
// unless the comet closed it with code.
func (c *Conn) ExpectClose(tb testing.TB, code int, d time.Duration) {
	tb.Helper()
	got, err := c.CloseCode(d)
	if got != code {
		tb.Fatalf("connection ended with close code %d (%v), want %d", got, err, code)
	}
}

// Wrap reads ws, a connection the test dialed itself (over TLS, with
// compression, through a dialer of its own), frame by frame.
func Wrap(ws *websocket.Conn) *Conn { return &Conn{ws: ws} }
