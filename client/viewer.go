package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// ViewerConfig configures a Viewer.
type ViewerConfig struct {
	// URLs are the comets' WebSocket URLs ("ws://host:8080/ws"). The
	// first is dialled first; every reconnect moves on to the next.
	URLs []string
	// Transport is TransportWebSocket or TransportSSE to use that one
	// only; empty (auto) uses WebSockets and falls back to SSE, for good,
	// when a WebSocket cannot be opened and none ever opened: something
	// between the viewer and the comet answered the handshake with no
	// upgrade and no answer of the comet's, as a proxy that breaks
	// WebSockets does. A comet's SSE URL is its WebSocket URL with http
	// for ws and /sse for /ws ("http://host:8080/sse").
	Transport string
	// Rooms are joined at once: the first as a join, the others as subs.
	Rooms []string
	// Token is the viewer's JWT (comet.auth: jwt, or to receive user
	// notices); TokenFunc, when set, is asked for one before every
	// connection instead (a fresh token for a long-lived viewer).
	Token     string
	TokenFunc func() (string, error)
	// UID is the viewer's claimed user id with auth off and no token.
	UID string
	// Header is sent with every handshake (an Origin, a cookie).
	Header http.Header
	// BackoffMin and BackoffMax bound the wait before a reconnect: full
	// jitter below min(BackoffMax, BackoffMin × 2^n), n counting the
	// connections in a row that got no welcome; 0 means 500 ms and 15 s.
	BackoffMin, BackoffMax time.Duration
	// DialTimeout bounds each handshake; 0 means 10 s.
	DialTimeout time.Duration
	// Buffer is the size of the events channel; 0 means 256. A viewer
	// whose events are not read stops reading its socket; the comet then
	// catches it up or cuts it, and the viewer resumes.
	Buffer int
	// SeenIDs is how many delivered message and notice ids the viewer
	// remembers to drop repeats; 0 means 65,536.
	SeenIDs int
}

// timeline is where a room's viewer stands: the epoch and the last
// position it received.
type timeline struct {
	epoch string
	pos   int64
}

// Viewer is a resuming WebSocket viewer of one or more rooms. Make it
// with NewViewer; read Events until it is closed.
type Viewer struct {
	cfg    ViewerConfig
	events chan Event
	quit   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	link     link     // the open connection, nil between connections
	sse      bool     // connect over SSE
	wsOpened bool     // a WebSocket opened once: no fallback to SSE
	rooms    []string // held, the first is the joined room
	timeline map[string]timeline
	asked    map[string]timeline // resumes not answered yet
	next     int                 // index in cfg.URLs of the next connection
	attempt  int
	seen     seenSet
	notices  seenSet
	info     map[string]*roomInfo // settings and pins by room
}

// NewViewer starts a viewer: it connects in the background and keeps
// reconnecting until Close.
func NewViewer(cfg ViewerConfig) (*Viewer, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("client: a viewer needs at least one comet URL")
	}
	switch cfg.Transport {
	case "", TransportWebSocket, TransportSSE:
	default:
		return nil, fmt.Errorf("client: transport %q: want %q, %q or empty", cfg.Transport, TransportWebSocket, TransportSSE)
	}
	for _, r := range cfg.Rooms {
		if err := danmaku.CheckID("room", r); err != nil {
			return nil, err
		}
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 500 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 15 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 256
	}
	if cfg.SeenIDs <= 0 {
		cfg.SeenIDs = 1 << 16
	}
	v := &Viewer{cfg: cfg, events: make(chan Event, cfg.Buffer), quit: make(chan struct{}), done: make(chan struct{}),
		rooms: slices.Compact(slices.Clone(cfg.Rooms)), timeline: map[string]timeline{}, asked: map[string]timeline{},
		seen: newSeenSet(cfg.SeenIDs), notices: newSeenSet(cfg.SeenIDs), info: map[string]*roomInfo{},
		sse: cfg.Transport == TransportSSE}
	go v.loop()
	return v, nil
}

// Events is the viewer's events, in the order they happened. It is closed
// after the Closed event.
func (v *Viewer) Events() <-chan Event { return v.events }

// Close ends the viewer: the connection is closed, no reconnect follows.
func (v *Viewer) Close() error {
	v.mu.Lock()
	select {
	case <-v.quit:
	default:
		close(v.quit)
	}
	l := v.link
	v.mu.Unlock()
	if l != nil {
		l.close()
	}
	<-v.done
	return nil
}

// Rooms returns the rooms the viewer holds.
func (v *Viewer) Rooms() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.rooms)
}

// Position returns room's epoch and the last position the viewer
// received there; ok is false before its first welcome.
func (v *Viewer) Position(room string) (epoch string, pos int64, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	tl, ok := v.timeline[room]
	return tl.epoch, tl.pos, ok
}

// Join switches to room, leaving every other room (resuming room where
// the viewer left it, if it held it before).
func (v *Viewer) Join(room string) error {
	return v.change(danmaku.OpJoin, room, func(rooms []string) []string { return []string{room} })
}

// Subscribe adds room, keeping the others.
func (v *Viewer) Subscribe(room string) error {
	return v.change(danmaku.OpSub, room, func(rooms []string) []string {
		if slices.Contains(rooms, room) {
			return rooms
		}
		return append(rooms, room)
	})
}

// Unsubscribe leaves room, keeping the others.
func (v *Viewer) Unsubscribe(room string) error {
	return v.change(danmaku.OpUnsub, room, func(rooms []string) []string {
		return slices.DeleteFunc(rooms, func(r string) bool { return r == room })
	})
}

// change updates the rooms held and, when connected, sends the op; a
// connection that opens later names the rooms in its URL.
func (v *Viewer) change(op, room string, rooms func([]string) []string) error {
	if err := danmaku.CheckID("room", room); err != nil {
		return err
	}
	v.mu.Lock()
	v.rooms = rooms(v.rooms)
	l, f := v.link, v.frameLocked(op, room)
	v.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.send(f)
}

// frameLocked is the client frame of op for room, resuming it when the
// viewer has a timeline for it.
func (v *Viewer) frameLocked(op, room string) danmaku.ClientFrame {
	f := danmaku.ClientFrame{Op: op, Room: room}
	if op == danmaku.OpUnsub {
		return f
	}
	if tl, ok := v.timeline[room]; ok {
		pos := tl.pos
		f.Since, f.Epoch = &pos, tl.epoch
		v.asked[room] = tl
	} else {
		delete(v.asked, room)
	}
	return f
}

// emit hands ev to the application, unless the viewer is closing.
func (v *Viewer) emit(ev Event) bool {
	select {
	case v.events <- ev:
		return true
	case <-v.quit:
		return false
	}
}

func (v *Viewer) closing() bool {
	select {
	case <-v.quit:
		return true
	default:
		return false
	}
}

// loop connects, reads until the connection ends, and reconnects.
func (v *Viewer) loop() {
	defer close(v.done)
	defer close(v.events)
	var err error
	for !v.closing() {
		full, u, rooms, derr := v.target()
		if derr == nil {
			err = v.connect(full, u, rooms)
			if ce := (*websocket.CloseError)(nil); errors.As(err, &ce) && ce.Code == closeBanned {
				v.emit(Event{Kind: Closed, URL: u, Err: &Error{Code: danmaku.CodeBanned, Message: ce.Text}})
				return
			}
		} else {
			err = derr
		}
		if errors.Is(err, errFallBack) {
			continue // at once, over SSE
		}
		if v.closing() {
			break
		}
		v.emit(Event{Kind: Disconnected, URL: u, Err: err})
		select {
		case <-v.quit:
		case <-time.After(v.backoff()):
		}
	}
	// Close may come from an application that no longer reads: the
	// channel's closing says the same when there is no room for the event.
	select {
	case v.events <- Event{Kind: Closed}:
	default:
	}
}

// closeBanned is the close code of a ban of the connection's last room.
const closeBanned = 4003

func (v *Viewer) backoff() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	ceil := min(v.cfg.BackoffMax, v.cfg.BackoffMin<<min(v.attempt, 16))
	v.attempt++
	v.next = (v.next + 1) % len(v.cfg.URLs)
	return rand.N(ceil) + 1
}

// target is the URL of the next connection, naming every room held with
// its resume position, the comet's URL (without the query, which holds
// the token) and the rooms held.
func (v *Viewer) target() (full, base string, rooms []string, err error) {
	tok := v.cfg.Token
	if v.cfg.TokenFunc != nil {
		var err error
		if tok, err = v.cfg.TokenFunc(); err != nil {
			return "", v.cfg.URLs[v.next], nil, fmt.Errorf("token: %w", err)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	q := url.Values{}
	for i, room := range v.rooms {
		q.Add("room", room)
		key := ""
		if i > 0 {
			key = "." + room
		}
		if f := v.frameLocked(danmaku.OpSub, room); f.Since != nil {
			q.Set("since"+key, strconv.FormatInt(*f.Since, 10))
			q.Set("epoch"+key, f.Epoch)
		}
	}
	if v.cfg.UID != "" {
		q.Set("uid", v.cfg.UID)
	}
	if tok != "" {
		q.Set("token", tok)
	}
	base = v.cfg.URLs[v.next]
	if v.sse {
		base = sseURL(base)
	}
	full = base
	if len(q) > 0 {
		full += "?" + q.Encode()
	}
	return full, base, slices.Clone(v.rooms), nil
}

// connect opens a connection to full, over the transport in use, and
// reads it until it ends. A WebSocket that cannot be opened switches an
// auto viewer to SSE (errFallBack).
func (v *Viewer) connect(full, base string, rooms []string) error {
	v.mu.Lock()
	sse := v.sse
	v.mu.Unlock()
	if sse {
		return v.sessionSSE(full, base, rooms)
	}
	ws, err := v.dial(full)
	if err != nil {
		return v.fallBack(err)
	}
	v.mu.Lock()
	v.wsOpened = true
	v.mu.Unlock()
	return v.session(ws, base, rooms)
}

// errFallBack ends a connection attempt whose WebSocket could not be
// opened: the viewer continues over SSE.
var errFallBack = errors.New("client: the WebSocket could not be opened; falling back to SSE")

// fallBack switches an auto viewer whose WebSockets never opened to SSE
// when err says the handshake was answered by something else than the
// comet (no upgrade, no error of the comet's), or reached the comet
// without its upgrade headers (a 400 that names no field: a proxy
// dropped them).
func (v *Viewer) fallBack(err error) error {
	var e *Error
	stripped := errors.As(err, &e) && e.Status == http.StatusBadRequest && e.Code == danmaku.EINVALID && e.Field == ""
	if v.cfg.Transport != "" || !(stripped || e == nil && errors.Is(err, websocket.ErrBadHandshake)) {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.wsOpened {
		return err
	}
	v.sse = true
	return errFallBack
}

// Transport returns the transport the viewer uses now:
// TransportWebSocket or TransportSSE.
func (v *Viewer) Transport() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sse {
		return TransportSSE
	}
	return TransportWebSocket
}

// dial opens a connection; a refused handshake is an *Error with the
// comet's status and code.
func (v *Viewer) dial(u string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: v.cfg.DialTimeout, Proxy: http.ProxyFromEnvironment}
	ws, resp, err := d.Dial(u, v.cfg.Header)
	if err != nil && resp != nil {
		defer resp.Body.Close()
		var eb danmaku.ErrorBody
		if json.NewDecoder(resp.Body).Decode(&eb) == nil && eb.Error.Code != "" {
			return nil, &Error{Status: resp.StatusCode, Code: eb.Error.Code, Field: eb.Error.Field, Message: eb.Error.Message}
		}
	}
	return ws, err
}
