package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// frameConn is a viewer's connection: a WebSocket, or an SSE stream
// (sseConn) read through the same calls.
type frameConn interface {
	NextReader() (int, io.Reader, error)
	ReadMessage() (int, []byte, error)
	SetReadDeadline(time.Time) error
	NetConn() net.Conn
}

// sseConn is one GET /sse stream over its own TCP connection: each event's
// data is one frame. The stream's close event comes out as the
// *websocket.CloseError a WebSocket viewer would get.
type sseConn struct {
	conn net.Conn
	body *bufio.Reader
	data []byte
	long []byte // a line longer than body's buffer
	rd   bytes.Reader
}

// dialSSE opens GET /sse?query on target over a connection from dial and
// reads the stream's first event (its id). A refusal returns the
// response.
func dialSSE(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), target, query string, timeout time.Duration) (*sseConn, *http.Response, error) {
	conn, _, resp, err := openHTTP(ctx, dial, target, "GET /sse?"+query+" HTTP/1.1\r\nHost: "+target+
		"\r\nOrigin: http://"+target+"\r\nAccept: text/event-stream\r\n\r\n", http.StatusOK, timeout)
	if err != nil {
		return nil, resp, err
	}
	c := &sseConn{conn: conn, body: bufio.NewReaderSize(resp.Body, 4096)}
	first, err := c.event()
	if err != nil || !bytes.Contains(first, []byte(`"op":"stream"`)) {
		conn.Close()
		return nil, nil, errors.New("no stream event")
	}
	conn.SetDeadline(time.Time{})
	return c, nil, nil
}

// event returns the data of the next event (valid until the next call).
func (c *sseConn) event() ([]byte, error) {
	c.data = c.data[:0]
	for {
		line, err := c.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 1 { // the blank line that ends an event
			if len(c.data) > 0 {
				return c.data, nil
			}
			continue
		}
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			c.data = append(c.data, d[:len(d)-1]...)
		}
	}
}

// line reads one line, its newline included.
func (c *sseConn) line() ([]byte, error) {
	line, err := c.body.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	c.long = append(c.long[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = c.body.ReadSlice('\n')
		c.long = append(c.long, line...)
	}
	return c.long, err
}

func (c *sseConn) NextReader() (int, io.Reader, error) {
	data, err := c.event()
	if err != nil {
		return 0, nil, err
	}
	if bytes.HasPrefix(data, []byte(`{"op":"close"`)) {
		var f danmaku.CloseFrame
		json.Unmarshal(data, &f)
		return 0, nil, &websocket.CloseError{Code: f.Code, Text: f.Reason}
	}
	c.rd.Reset(data)
	return websocket.TextMessage, &c.rd, nil
}

// openHTTP sends req, a request head, to target over a connection from
// dial and reads the response's head, all within timeout (the deadline
// stays set: the caller clears it once its stream is under way). A
// status other than want closes the connection and returns the response.
func openHTTP(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), target, req string, want int, timeout time.Duration) (net.Conn, *bufio.Reader, *http.Response, error) {
	conn, err := dial(ctx, "tcp", target)
	if err != nil {
		return nil, nil, nil, err
	}
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	if resp.StatusCode != want {
		conn.Close()
		return nil, nil, resp, errors.New("refused")
	}
	return conn, br, resp, nil
}

func (c *sseConn) ReadMessage() (int, []byte, error) {
	t, r, err := c.NextReader()
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(r)
	return t, b, err
}

func (c *sseConn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }
func (c *sseConn) NetConn() net.Conn                 { return c.conn }
