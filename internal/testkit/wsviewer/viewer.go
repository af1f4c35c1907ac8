// Package wsviewer is the tests' WebSocket viewer of a comet: it connects
// to /ws, reads every frame and records what it received (welcomes, msgs
// frames, every message and deletion as it arrived, the messages it
// showed, notices), and, by default, resumes like web/static/danmaku.js
// when its connection ends. DeliveredOnce, Delivered and NoGaps check
// what viewers showed. Conn is the same connection read frame by frame,
// for tests that check each frame, what a viewer sends and how the
// connection ends. Both decode frames as danmaku.ServerFrame.
package wsviewer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku/internal/testkit"
)

// Viewer is a WebSocket viewer of one room that behaves like
// web/static/danmaku.js: it keeps the room's epoch and last position from
// welcome and msgs frames, resumes with ?since=P&epoch=E on every
// reconnect, and drops a message id it already showed, counting it. It
// records every message it shows, every welcome and every msgs frame.
//
// When its connection ends without Drop or Close it reconnects, after
// danmaku.js's jittered backoff, to the next of its comets (the same one
// when it has one). A viewer made by Once keeps its one connection.
type Viewer struct {
	Room  string
	query url.Values // more query parameters of every connection
	once  bool       // one connection, no reconnect
	urls  []string

	resume chan struct{} // Resume after Drop
	quit   chan struct{} // Close
	done   chan struct{} // the connection loop ended

	mu       sync.Mutex
	ws       *websocket.Conn
	next     int // index in urls of the next connection
	conns    int // connections that got a welcome
	attempt  int // connections in a row without a welcome
	dropped  bool
	epoch    string
	pos      int64
	seen     map[string]bool
	shown    []Shown
	dups     int
	dupIDs   []string
	welcomes []Welcome
	frames   []Frame
	arrivals []Arrival
	notices  map[string][]danmaku.Notice // by op
	states   []StateSeen
	pins     []PinSeen
	gaps     []string
	lastErr  error
}

// Arrival is one message of a msgs frame, or one id of a del frame, as it
// arrived: repeats are recorded too.
type Arrival struct {
	Msg     danmaku.Message // zero for a deletion
	Deleted string          // the id a del frame deleted
	Epoch   string
	Replay  bool
	Conn    int
}

// Shown is a message the viewer showed.
type Shown struct {
	ID     string
	Pos    int64
	Epoch  string
	Replay bool
	Conn   int       // connection it arrived on, from 1
	At     time.Time // when it arrived
}

// Welcome is a welcome frame as received.
type Welcome struct {
	Conn      int
	URL       string
	Since     int64  // the since the connection asked for; -1: none
	Epoch     string // of the welcome
	Pos       int64
	Recovered *bool     // nil when the welcome has no "recovered"
	At        time.Time // when it arrived
	State     *danmaku.RoomState
	Pin       *danmaku.Pin
}

func (w Welcome) String() string {
	rec := "absent"
	if w.Recovered != nil {
		rec = strconv.FormatBool(*w.Recovered)
	}
	return fmt.Sprintf("welcome{conn %d, since %d, epoch %q, pos %d, recovered %s, %s}", w.Conn, w.Since, w.Epoch, w.Pos, rec, w.URL)
}

// Frame is a msgs frame as received.
type Frame struct {
	Conn        int
	Room        string
	Replay      bool
	Epoch       string
	N           int
	First, Last int64 // positions of the first and last message
}

// decoded holds the last frames decoded, by their bytes: the viewers of a
// room receive the same bytes (a comet encodes a batch once for all), so
// each frame is decoded once however many viewers the test runs. The
// decoded frames are shared and never modified.
var decoded = struct {
	sync.Mutex
	m     map[string]*danmaku.ServerFrame
	order []string
}{m: map[string]*danmaku.ServerFrame{}}

const decodedFrames = 1024

func decode(data []byte) (*danmaku.ServerFrame, error) {
	decoded.Lock()
	f, ok := decoded.m[string(data)]
	decoded.Unlock()
	if ok {
		return f, nil
	}
	f = new(danmaku.ServerFrame)
	if err := json.Unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("bad frame %q: %v", data, err)
	}
	key := string(data)
	decoded.Lock()
	defer decoded.Unlock()
	if _, ok := decoded.m[key]; !ok {
		if len(decoded.order) == decodedFrames {
			delete(decoded.m, decoded.order[0])
			decoded.order = decoded.order[1:]
		}
		decoded.m[key] = f
		decoded.order = append(decoded.order, key)
	}
	return f, nil
}

var dialer = &websocket.Dialer{HandshakeTimeout: 3 * time.Second}

// Dial connects a viewer of room to the first of urls (comet /ws URLs)
// and waits for its welcome. It is closed when tb ends.
func Dial(tb testing.TB, room string, urls ...string) *Viewer {
	tb.Helper()
	v := DialAsync(tb, room, urls...)
	v.WaitWelcomes(tb, 1, 15*time.Second)
	return v
}

// DialAsync is Dial without waiting for the welcome: the viewer connects
// (and reconnects until welcomed) in the background.
func DialAsync(tb testing.TB, room string, urls ...string) *Viewer {
	tb.Helper()
	v := newViewer(room, nil, urls)
	go v.loop(nil)
	tb.Cleanup(v.Close)
	return v
}

// Once connects one viewer to wsURL (a comet's /ws URL) for tests that
// count what a single connection received: a viewer of room when room is
// set (and then it waits for the welcome), with the more query parameters
// of query (a user's uid and token). The dial failing fails tb; the viewer
// never reconnects. It is closed when tb ends.
func Once(tb testing.TB, wsURL, room string, query url.Values) *Viewer {
	tb.Helper()
	v := newViewer(room, query, []string{wsURL})
	v.once = true
	ws, err := v.dial()
	if err != nil {
		tb.Fatalf("dial %s: %v", wsURL, err)
	}
	go v.loop(ws)
	tb.Cleanup(v.Close)
	if room != "" {
		v.WaitWelcomes(tb, 1, 5*time.Second)
	}
	return v
}

func newViewer(room string, query url.Values, urls []string) *Viewer {
	return &Viewer{Room: room, query: query, urls: urls, resume: make(chan struct{}, 1), quit: make(chan struct{}),
		done: make(chan struct{}), seen: map[string]bool{}, notices: map[string][]danmaku.Notice{}}
}

// loop connects (first is a connection already made), reads until the
// connection ends, and reconnects.
func (v *Viewer) loop(first *websocket.Conn) {
	defer close(v.done)
	for {
		err := v.session(first)
		first = nil
		if v.once {
			v.mu.Lock()
			v.ws, v.lastErr = nil, err
			v.mu.Unlock()
			return
		}
		v.mu.Lock()
		v.ws = nil
		if err != nil {
			v.lastErr = err
		}
		dropped := v.dropped
		v.next = (v.next + 1) % len(v.urls)
		v.mu.Unlock()
		if dropped {
			select {
			case <-v.quit:
				return
			case <-v.resume:
			}
			continue
		}
		select {
		case <-v.resume: // a Resume that came before the loop saw the drop
		default:
		}
		select {
		case <-v.quit:
			return
		case <-time.After(v.backoff()):
		}
	}
}

// Reconnect backoff as in danmaku.js: full jitter below
// min(backoffMax, backoffMin * 2^attempts), attempts counting the
// connections in a row that got no welcome. (danmaku.js caps it at 15 s;
// tests do not wait that long.)
const (
	backoffMin = 500 * time.Millisecond
	backoffMax = 2 * time.Second
)

func (v *Viewer) backoff() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	ceil := min(backoffMax, backoffMin<<min(v.attempt, 8))
	v.attempt++
	return rand.N(ceil)
}

// target is the URL of the next connection, with the resume position, and
// the since it asks for (-1: none).
func (v *Viewer) target() (string, int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	q := url.Values{}
	for k, vs := range v.query {
		q[k] = vs
	}
	if v.Room != "" {
		q.Set("room", v.Room)
	}
	since := int64(-1)
	if v.epoch != "" {
		since = v.pos
		q.Set("since", strconv.FormatInt(v.pos, 10))
		q.Set("epoch", v.epoch)
	}
	return v.urls[v.next] + "?" + q.Encode(), since
}

func (v *Viewer) dial() (*websocket.Conn, error) {
	u, _ := v.target()
	ws, _, err := dialer.Dial(u, nil)
	return ws, err
}

// session is one connection (ws, or one it dials with the resume
// position): read frames until it ends.
func (v *Viewer) session(ws *websocket.Conn) error {
	u, since := v.target()
	if ws == nil {
		var err error
		if ws, _, err = dialer.Dial(u, nil); err != nil {
			return err
		}
	}
	defer ws.Close()
	v.mu.Lock()
	if v.dropped || isClosed(v.quit) {
		v.mu.Unlock()
		return nil
	}
	v.ws = ws
	v.mu.Unlock()
	conn := 0
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return err
		}
		f, err := decode(data)
		if err != nil {
			return err
		}
		switch {
		case f.Welcome != nil:
			conn = v.welcomed(f.Welcome, u, since)
		case f.Msgs != nil:
			if conn == 0 {
				return fmt.Errorf("msgs frame before the welcome: %.200s", data)
			}
			v.received(f.Msgs, conn)
		case f.Del != nil:
			v.deleted(f.Del, conn)
		case f.Notices != nil:
			v.notified(f.Notices)
		case f.State != nil:
			v.stated(f.State)
		case f.Pin != nil:
			v.pinned(f.Pin)
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// welcomed takes the timeline from a welcome like danmaku.js: a recovered
// resume keeps the client's position, anything else starts at the
// welcome's.
func (v *Viewer) welcomed(f *danmaku.Welcome, u string, since int64) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.conns++
	v.attempt = 0
	v.welcomes = append(v.welcomes, Welcome{Conn: v.conns, URL: u, Since: since, Epoch: f.Epoch, Pos: f.Pos, Recovered: f.Recovered, At: time.Now(), State: f.State, Pin: f.Pin})
	if f.Epoch != "" && !(f.Recovered != nil && *f.Recovered && f.Epoch == v.epoch) {
		v.epoch, v.pos = f.Epoch, f.Pos
	}
	return v.conns
}

// received shows a msgs frame's new messages and moves the position on.
func (v *Viewer) received(f *danmaku.Batch, conn int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fr := Frame{Conn: conn, Room: f.Room, Replay: f.Replay, Epoch: f.Epoch, N: len(f.Msgs)}
	if len(f.Msgs) > 0 {
		fr.First, fr.Last = f.Msgs[0].Pos, f.Msgs[len(f.Msgs)-1].Pos
	}
	v.frames = append(v.frames, fr)
	var top int64
	now := time.Now()
	for _, m := range f.Msgs {
		v.arrivals = append(v.arrivals, Arrival{Msg: m, Epoch: f.Epoch, Replay: f.Replay, Conn: conn})
	}
	for _, m := range f.Msgs {
		top = max(top, m.Pos)
		if v.seen[m.ID] {
			v.dups++
			if len(v.dupIDs) < 5 {
				v.dupIDs = append(v.dupIDs, m.ID)
			}
			continue
		}
		v.seen[m.ID] = true
		if n := len(v.shown); n > 0 && m.Pos > 0 {
			if last := v.shown[n-1]; last.Epoch == f.Epoch && last.Pos > 0 && m.Pos != last.Pos+1 {
				v.gaps = append(v.gaps, fmt.Sprintf("conn %d: pos %d after %d (epoch %s, replay %v)", conn, m.Pos, last.Pos, f.Epoch, f.Replay))
			}
		}
		v.shown = append(v.shown, Shown{ID: m.ID, Pos: m.Pos, Epoch: f.Epoch, Replay: f.Replay, Conn: conn, At: now})
	}
	if f.Epoch == "" {
		return
	}
	if f.Epoch == v.epoch {
		v.pos = max(v.pos, top)
	} else {
		v.epoch, v.pos = f.Epoch, top
	}
}

// deleted records a del frame's ids.
func (v *Viewer) deleted(f *danmaku.DelFrame, conn int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, id := range f.IDs {
		v.arrivals = append(v.arrivals, Arrival{Deleted: id, Conn: conn})
	}
}

// stated records a state frame.
func (v *Viewer) stated(f *danmaku.StateFrame) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.states = append(v.states, StateSeen{State: f.State, At: time.Now()})
}

// StateSeen is a state frame as received.
type StateSeen struct {
	State danmaku.RoomState
	At    time.Time
}

// pinned records a pin or unpin frame.
func (v *Viewer) pinned(f *danmaku.PinFrame) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pins = append(v.pins, PinSeen{Op: f.Op, Pin: f.Pin})
}

// PinSeen is a pin or unpin frame as received.
type PinSeen struct {
	Op  string
	Pin danmaku.Pin
}

// Pins returns the pin and unpin frames received, oldest first.
func (v *Viewer) Pins() []PinSeen {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]PinSeen(nil), v.pins...)
}

// States returns the state frames received, oldest first.
func (v *Viewer) States() []StateSeen {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]StateSeen(nil), v.states...)
}

// notified records a notice frame's notices.
func (v *Viewer) notified(f *danmaku.NoticeFrame) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.notices[f.Op] = append(v.notices[f.Op], f.Msgs...)
}

// Drop cuts the connection (a network drop) and does not reconnect until
// Resume.
func (v *Viewer) Drop() {
	v.mu.Lock()
	v.dropped = true
	ws := v.ws
	v.mu.Unlock()
	if ws != nil {
		ws.Close()
	}
}

// Resume reconnects a dropped viewer, to its next comet, with the
// position it holds, and waits for the welcome.
func (v *Viewer) Resume(tb testing.TB) {
	tb.Helper()
	v.mu.Lock()
	want := v.conns + 1
	v.dropped = false
	v.mu.Unlock()
	v.resume <- struct{}{}
	v.WaitWelcomes(tb, want, 15*time.Second)
}

// ResumeAsync is Resume without waiting for the welcome.
func (v *Viewer) ResumeAsync() {
	v.mu.Lock()
	v.dropped = false
	v.mu.Unlock()
	v.resume <- struct{}{}
}

// Close ends the viewer for good.
func (v *Viewer) Close() {
	v.mu.Lock()
	if !isClosed(v.quit) {
		close(v.quit)
	}
	ws := v.ws
	v.mu.Unlock()
	if ws != nil {
		ws.Close()
	}
	<-v.done
}

// WaitWelcomes waits until the viewer got n welcomes in all.
func (v *Viewer) WaitWelcomes(tb testing.TB, n int, d time.Duration) {
	tb.Helper()
	testkit.SucceedsSoon(tb, d, func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		if len(v.welcomes) < n {
			return fmt.Errorf("viewer of %s: %d welcomes, want %d (last error %v)", v.Room, len(v.welcomes), n, v.lastErr)
		}
		return nil
	})
}

// Welcomes returns the welcomes received, oldest first.
func (v *Viewer) Welcomes() []Welcome {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Welcome(nil), v.welcomes...)
}

// Frames returns the msgs frames received, oldest first.
func (v *Viewer) Frames() []Frame {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Frame(nil), v.frames...)
}

// Shown returns the messages shown, in order.
func (v *Viewer) Shown() []Shown {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Shown(nil), v.shown...)
}

// Arrivals returns every message and deletion received, in order, repeats
// included.
func (v *Viewer) Arrivals() []Arrival {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Arrival(nil), v.arrivals...)
}

// Notices returns the notices of frames of op (danmaku.OpUser,
// danmaku.OpAll) received, in order, repeats included.
func (v *Viewer) Notices(op string) []danmaku.Notice {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]danmaku.Notice(nil), v.notices[op]...)
}

// Missing returns the ids of ids the viewer has not shown.
func (v *Viewer) Missing(ids []string) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var miss []string
	for _, id := range ids {
		if !v.seen[id] {
			miss = append(miss, id)
		}
	}
	return miss
}

// Duplicates returns how many messages the viewer dropped as already
// shown, and up to five of their ids.
func (v *Viewer) Duplicates() (int, []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dups, append([]string(nil), v.dupIDs...)
}

// Gaps describes every shown message whose position is not one past the
// message shown before it in the same epoch.
func (v *Viewer) Gaps() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.gaps...)
}

// Conns returns how many connections of the viewer were welcomed.
func (v *Viewer) Conns() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.conns
}

// Position returns the epoch and last position the viewer holds.
func (v *Viewer) Position() (string, int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.epoch, v.pos
}
