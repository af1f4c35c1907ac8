package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// The transports of a Viewer (ViewerConfig.Transport).
const (
	TransportWebSocket = "websocket"
	TransportSSE       = "sse"
)

// link is an open connection to a comet: it sends client frames, and
// closing it ends its session.
type link interface {
	send(f danmaku.ClientFrame) error
	close()
}

// wsLink is a WebSocket.
type wsLink struct {
	ws *websocket.Conn
	mu sync.Mutex // serializes writes
}

func (l *wsLink) send(f danmaku.ClientFrame) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return l.ws.WriteJSON(f)
}

func (l *wsLink) close() { l.ws.Close() }

// sseLink is an SSE stream: GET /sse reads the comet's frames as events,
// the client's frames are posted to /sse?stream=ID.
type sseLink struct {
	ops    string // the stream's ops URL
	header http.Header
	cancel context.CancelFunc // ends the stream
}

// sseHTTP posts a stream's ops.
var sseHTTP = &http.Client{Timeout: 10 * time.Second}

func (l *sseLink) send(f danmaku.ClientFrame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, l.ops, bytes.NewReader(b))
	if err != nil {
		return err
	}
	for k, v := range l.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := sseHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusAccepted {
		return nil
	}
	if resp.StatusCode == http.StatusNotFound {
		l.cancel() // the stream ended: the viewer opens a new one
	}
	return answerError(resp, body)
}

func (l *sseLink) close() { l.cancel() }

// sseURL is the SSE URL of the comet of a WebSocket URL.
func sseURL(ws string) string {
	u, err := url.Parse(ws)
	if err != nil {
		return ws
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	if p, ok := strings.CutSuffix(u.Path, "/ws"); ok {
		u.Path = p + "/sse"
	}
	return u.String()
}

// sseStreams opens streams: no overall timeout (a stream lasts), the
// handshake bounded by the viewer's DialTimeout.
var sseStreams = &http.Client{}

// sessionSSE opens a stream on full and reads it until it ends. base is
// the stream's URL without the query, rooms the rooms its URL named.
func (v *Viewer) sessionSSE(full, base string, rooms []string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, full, nil)
	if err != nil {
		return err
	}
	for k, vals := range v.cfg.Header {
		req.Header[k] = vals
	}
	req.Header.Set("Accept", "text/event-stream")
	watchdog := time.AfterFunc(v.cfg.DialTimeout, cancel)
	defer watchdog.Stop()
	resp, err := sseStreams.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return answerError(resp, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxFrame)
	first, err := sseEvent(sc, watchdog, readWait)
	var sf danmaku.StreamFrame
	if err != nil || json.Unmarshal(first, &sf) != nil || sf.Op != danmaku.OpStream || sf.ID == "" {
		return errors.Join(errors.New("client: the stream did not name itself"), err)
	}
	l := &sseLink{ops: base + "?stream=" + url.QueryEscape(sf.ID), header: v.cfg.Header, cancel: cancel}
	if ok, err := v.opened(l, base, rooms); !ok {
		return err
	}
	defer v.unlink()
	wait := readWait
	for {
		data, err := sseEvent(sc, watchdog, wait)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(data, []byte(`{"op":"close"`)) {
			var cf danmaku.CloseFrame
			json.Unmarshal(data, &cf)
			return &websocket.CloseError{Code: cf.Code, Text: cf.Reason}
		}
		if more, err := v.frame(data, &wait); !more {
			return err
		}
	}
}

// sseEvent reads the data of the next event; every line (the comet's
// pings are comments) pushes the watchdog wait further.
func sseEvent(sc *bufio.Scanner, watchdog *time.Timer, wait time.Duration) ([]byte, error) {
	var data []byte
	for {
		watchdog.Reset(wait)
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return nil, err
			}
			return nil, io.ErrUnexpectedEOF
		}
		line := sc.Bytes()
		if len(line) == 0 && data != nil {
			return data, nil
		}
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
}
