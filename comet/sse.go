package comet

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// The SSE transport: GET /sse takes the parameters of /ws and streams
// the frames a WebSocket viewer would get as server-sent events, one
// frame per event; POST /sse?stream=ID carries the viewer's client frames
// (join, sub, unsub, ping).
//
// A stream is a WebSocket viewer of this comet over an in-memory pipe:
// the GET request is replayed as a WebSocket handshake to serveWS (with
// the request's address, headers and TLS state), so every rule of /ws
// holds unchanged for SSE viewers: origin check, token, per-address
// limit, history on join, resume with recovered true or false, gap
// repair, the bounded send queue and the catch-up of a slow viewer,
// heartbeats, bans. The pipe has no buffer: a browser that stops reading
// blocks the stream's write, which gives up after write_wait; the comet's
// write into the pipe then blocks too and the viewer is cut as a slow
// one. The stream forwards the comet's pings as SSE comments.

// sseStreams are the open streams by id, for the ops posted to them.
type sseStreams struct {
	mu     sync.Mutex
	m      map[string]*sseStream
	ending bool // EndStreams was called: every stream ends at once
}

// sseStream is the client side of one stream's pipe.
type sseStream struct {
	ws    *websocket.Conn
	wmu   sync.Mutex // serializes writes to ws (ops, pongs)
	place *ssePlace
	away  atomic.Bool // ended by EndStreams: the comet is going away
}

func (st *sseStream) writeText(b []byte) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return st.ws.WriteMessage(websocket.TextMessage, b)
}

func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.streamSSE(w, r)
	case http.MethodPost:
		s.sseOp(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		httpx.WriteError(w, danmaku.Errorf(danmaku.CodeMethod, "method", "use GET for a stream, POST for its ops"))
	}
}

// streamSSE opens the stream's WebSocket over a pipe and forwards its
// frames as events until either side ends.
func (s *Server) streamSSE(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpx.WriteError(w, danmaku.Errorf(danmaku.EINTERNAL, "", "streaming not supported"))
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		q, err := eventIDQuery(r.URL.Query(), last)
		if err != nil {
			s.metrics.rejected("bad_event_id")
			httpx.WriteError(w, err)
			return
		}
		u := *r.URL
		u.RawQuery = q.Encode()
		r = r.Clone(r.Context())
		r.URL = &u
	}
	ws, refused := s.bridge(r)
	if ws == nil {
		refused.relay(w)
		return
	}
	st := &sseStream{ws: ws, place: newSSEPlace(r, s.cfg.MaxRoomsPerConn)}
	id := s.sse.add(st)
	defer s.sse.remove(id)
	stop := context.AfterFunc(r.Context(), func() { ws.Close() })
	defer stop()
	defer ws.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	event := func(id string, moved bool, data []byte) error {
		rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteWait))
		if moved {
			io.WriteString(w, "id: ")
			io.WriteString(w, id)
			io.WriteString(w, "\n")
		}
		if _, err := io.WriteString(w, "data: "); err != nil {
			return err
		}
		w.Write(data)
		if _, err := io.WriteString(w, "\n\n"); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	}
	first, _ := json.Marshal(danmaku.StreamFrame{Op: danmaku.OpStream, ID: id})
	if event("", false, first) != nil {
		return
	}
	ws.SetPingHandler(func(data string) error {
		rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteWait))
		if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
			return err
		}
		flusher.Flush()
		st.wmu.Lock()
		defer st.wmu.Unlock()
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(5*time.Second))
	})
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			switch {
			case errors.As(err, &ce):
			case st.away.Load():
				ce = &websocket.CloseError{Code: websocket.CloseGoingAway, Text: "shutting down"}
			default:
				return
			}
			b, _ := json.Marshal(danmaku.CloseFrame{Op: danmaku.OpClose, Code: ce.Code, Reason: ce.Text})
			event("", false, b)
			return
		}
		id, moved := st.place.frame(data)
		if event(id, moved, data) != nil {
			return
		}
	}
}

// sseOp hands a client frame to the stream it names. The answer only
// says the frame was handed over; the comet's answer (welcome, error,
// unsubscribed, pong) comes on the stream.
func (s *Server) sseOp(w http.ResponseWriter, r *http.Request) {
	if !s.originAllowed(r) {
		s.metrics.rejected("origin")
		httpx.WriteError(w, danmaku.Errorf(danmaku.CodeForbidden, "origin", "origin %q not allowed", r.Header.Get("Origin")))
		return
	}
	st := s.sse.get(r.URL.Query().Get("stream"))
	if st == nil {
		httpx.WriteError(w, danmaku.Errorf(danmaku.ENOTFOUND, "stream", "no such stream (it ended: open a new one)"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxFrameBytes+1))
	switch {
	case err != nil:
		httpx.WriteError(w, danmaku.Errorf(danmaku.EINVALID, "body", "read body: %v", err))
		return
	case int64(len(body)) > s.cfg.MaxFrameBytes:
		httpx.WriteError(w, danmaku.Errorf(danmaku.CodeTooLarge, "body", "a frame is at most %d bytes", s.cfg.MaxFrameBytes))
		return
	}
	st.place.posted(body)
	if err := st.writeText(body); err != nil {
		httpx.WriteError(w, danmaku.Errorf(danmaku.ENOTFOUND, "stream", "the stream ended: open a new one"))
		return
	}
	httpx.WriteJSON(w, http.StatusAccepted, struct{}{})
}

func (ss *sseStreams) add(st *sseStream) string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]*sseStream{}
	}
	ss.m[id] = st
	if ss.ending {
		st.end()
	}
	return id
}

// end makes the stream end with the close event 1001, as a WebSocket
// viewer of a comet that shuts down is closed.
func (st *sseStream) end() {
	st.away.Store(true)
	st.ws.Close()
}

// EndStreams ends every SSE stream, and every stream opened later, with
// the close event 1001 (going away): a stream is a request in progress
// that an HTTP server's Shutdown would otherwise wait for. The comet's
// own listener calls it when it shuts down; a server that mounts
// PublicHandler registers it with RegisterOnShutdown.
func (s *Server) EndStreams() {
	ss := &s.sse
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.ending = true
	for _, st := range ss.m {
		st.end()
	}
}

func (ss *sseStreams) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

func (ss *sseStreams) get(id string) *sseStream {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[id]
}

// refusal is the answer serveWS gave a handshake it refused.
type refusal struct {
	header http.Header
	status int
	body   []byte
}

func (rf *refusal) relay(w http.ResponseWriter) {
	if rf.status == 0 {
		httpx.WriteError(w, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "the stream could not be opened"))
		return
	}
	for k, v := range rf.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rf.status)
	w.Write(rf.body)
}

// bridge replays r as a WebSocket handshake to serveWS over a pipe and
// returns the client side of the new connection, or what serveWS
// answered when it refused.
func (s *Server) bridge(r *http.Request) (*websocket.Conn, *refusal) {
	srv, cli := net.Pipe()
	rw := &pipeWriter{conn: srv, header: http.Header{}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		br := bufio.NewReader(srv)
		req, err := http.ReadRequest(br)
		if err != nil {
			srv.Close()
			return
		}
		req.RemoteAddr, req.TLS = r.RemoteAddr, r.TLS
		rw.brw = bufio.NewReadWriter(br, bufio.NewWriter(srv))
		s.serveWS(rw, req)
		if !rw.hijacked {
			srv.Close()
		}
	}()
	hdr := http.Header{}
	for _, k := range []string{"Origin", "Authorization", "Cookie", "User-Agent", "X-Forwarded-For", "X-Real-Ip"} {
		if v, ok := r.Header[k]; ok {
			hdr[k] = v
		}
	}
	d := websocket.Dialer{
		NetDialContext:   func(context.Context, string, string) (net.Conn, error) { return cli, nil },
		HandshakeTimeout: 10 * time.Second,
	}
	ws, _, err := d.Dial("ws://"+r.Host+"/ws?"+r.URL.RawQuery, hdr)
	if err != nil {
		cli.Close()
		<-served
		return nil, &refusal{header: rw.header, status: rw.status, body: rw.body}
	}
	return ws, nil
}

// pipeWriter is the ResponseWriter serveWS gets for a bridged handshake:
// a refusal is recorded for the SSE request to relay, an upgrade hijacks
// the pipe.
type pipeWriter struct {
	conn     net.Conn
	brw      *bufio.ReadWriter
	header   http.Header
	status   int
	body     []byte
	hijacked bool
}

func (p *pipeWriter) Header() http.Header { return p.header }

func (p *pipeWriter) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	p.body = append(p.body, b...)
	return len(b), nil
}

func (p *pipeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	p.hijacked = true
	return p.conn, p.brw, nil
}
