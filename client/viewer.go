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
	ws       *websocket.Conn
	wmu      sync.Mutex // serializes writes to ws
	rooms    []string   // held, the first is the joined room
	timeline map[string]timeline
	asked    map[string]timeline // resumes not answered yet
	next     int                 // index in cfg.URLs of the next connection
	attempt  int
	seen     seenSet
	notices  seenSet
}

// NewViewer starts a viewer: it connects in the background and keeps
// reconnecting until Close.
func NewViewer(cfg ViewerConfig) (*Viewer, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("client: a viewer needs at least one comet URL")
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
		seen: newSeenSet(cfg.SeenIDs), notices: newSeenSet(cfg.SeenIDs)}
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
	ws := v.ws
	v.mu.Unlock()
	if ws != nil {
		ws.Close()
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
	ws, f := v.ws, v.frameLocked(op, room)
	v.mu.Unlock()
	if ws == nil {
		return nil
	}
	return v.write(ws, f)
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

func (v *Viewer) write(ws *websocket.Conn, f danmaku.ClientFrame) error {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return ws.WriteJSON(f)
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
		var ws *websocket.Conn
		if derr == nil {
			ws, derr = v.dial(full)
		}
		if derr == nil {
			err = v.session(ws, u, rooms)
			if ce := (*websocket.CloseError)(nil); errors.As(err, &ce) && ce.Code == closeBanned {
				v.emit(Event{Kind: Closed, URL: u, Err: &Error{Code: danmaku.CodeBanned, Message: ce.Text}})
				return
			}
		} else {
			err = derr
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
	full = base
	if len(q) > 0 {
		full += "?" + q.Encode()
	}
	return full, base, slices.Clone(v.rooms), nil
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
