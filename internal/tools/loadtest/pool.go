package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// PoolSpec says which viewers one process opens. Viewer indices are
// global, so every process derives the same rooms from the same Layout.
type PoolSpec struct {
	// Targets are the comets' public addresses (host:port); viewer i goes
	// first to Targets[i%(len(Targets)-Standby)]: the last Standby targets
	// take viewers only when a dial fails. A failed dial moves the viewer
	// on to the next target, as a client with a list of comets does.
	Targets []string `json:"targets"`
	Standby int      `json:"standby,omitempty"`
	// Rooms, RoomViewers: the layout (see Layout).
	Rooms       []string `json:"rooms"`
	RoomViewers []int    `json:"roomViewers"`
	// From, To: the viewers [From, To) this process opens.
	From int `json:"from"`
	To   int `json:"to"`
	// Rate is connections per second for this process; Dialers bounds
	// handshakes in flight.
	Rate    float64 `json:"rate"`
	Dialers int     `json:"dialers"`
	// SourceIPs > 1 binds viewer i to 127.0.0.(SourceBase + i%SourceIPs), so
	// more than one ephemeral port range is available.
	SourceIPs  int `json:"sourceIPs"`
	SourceBase int `json:"sourceBase"`
	// ExactEvery: viewer i accounts every message exactly when
	// i%ExactEvery == 0; the others count frames, bytes and messages.
	ExactEvery int `json:"exactEvery"`
	// DialTimeout bounds one connection and its welcome frame.
	DialTimeout time.Duration `json:"dialTimeout"`
	// CPUProfile, when set in a worker process, is where it writes its
	// CPU profile.
	CPUProfile string `json:"cpuProfile,omitempty"`

	// Planned drops (see plan), over SendFor from Mark, drawn from Seed.
	Jitter     time.Duration `json:"jitter,omitempty"`
	Churn      float64       `json:"churn,omitempty"`
	ChurnDrops int           `json:"churnDrops,omitempty"`
	ChurnAway  time.Duration `json:"churnAway,omitempty"`
	SendFor    time.Duration `json:"sendFor,omitempty"`
	Seed       uint64        `json:"seed,omitempty"`
	// Reconnects: how many times a viewer the server or the network cut
	// resumes; 0: it stays closed and is not counted whole-time.
	Reconnects int `json:"reconnects,omitempty"`
	// UserBase > 0: viewer i connects as user UserBase+i+1 and accounts
	// the notices it gets (notice.go).
	UserBase int64 `json:"userBase,omitempty"`
	// TokenSecret signs the token with which each such viewer proves its
	// user to the comets (auth.hmac_secret); comets deliver user notices
	// only to proven users.
	TokenSecret string `json:"tokenSecret,omitempty"`
	// Tiers: the viewers' density caps (density.go); High: high-priority
	// messages are sent and accounted; Compress: viewers offer
	// permessage-deflate, as browsers do, and share the inflating of the
	// bytes a comet wrote to many of them (wsconn.go); SSE: viewers read
	// GET /sse streams instead of WebSockets.
	Tiers    []TierShare `json:"tiers,omitempty"`
	High     bool        `json:"high,omitempty"`
	Compress bool        `json:"compress,omitempty"`
	SSE      bool        `json:"sse,omitempty"`
}

// lanes reports whether frames are accounted by lane (density.go).
func (s *PoolSpec) lanes() bool { return len(s.Tiers) > 0 || s.High }

// Progress is a snapshot of the ramp.
type Progress struct {
	Connected int  `json:"connected"`
	Failed    int  `json:"failed"`
	Closed    int  `json:"closed"`
	Done      bool `json:"done"` // every dial finished
	// Away counts viewers between a drop and their resume.
	Away int `json:"away"`
	// Delivered counts messages received so far, so the drain can wait
	// until deliveries stop.
	Delivered uint64 `json:"delivered"`
}

// anyContent precedes every message's content; a load-test content is
// "lt:<seq>:<unixnano>".
var anyContent = []byte(`"content":"`)

const shards = 16

// shard collects latencies and per-second counts of the viewers that map
// to it; viewers take its lock once per frame.
type shard struct {
	mu     sync.Mutex
	hist   Hist
	replay Hist   // the part of hist that came in replay frames
	total  uint64 // messages and notices received
	perSec map[int64]*secStat
	// Latencies of notices to users and of broadcasts (notice.go), and
	// of high-priority messages (density.go).
	userHist, allHist, highHist Hist
}

type secStat struct {
	deliveries uint64
	hist       Hist
}

// viewer is one load-test viewer. The load tool keeps this lean client
// rather than the tests' wsviewer.Viewer: it runs tens of thousands of
// them in one process, reads each frame by scanning its bytes in a pooled
// buffer instead of decoding JSON, and records into per-shard histograms,
// so the generator's own CPU does not show up as delivery latency. It is a tool, not a test library, and the dependency
// rules keep it from linking internal/testkit.
type viewer struct {
	idx    int
	room   int
	target int // index in Targets of the comet it dials
	exact  bool

	// mu guards conn and dropAway: the drop scheduler and Finish close
	// the connection while the viewer's goroutine reads it.
	mu       sync.Mutex
	conn     frameConn     // nil between sessions
	dropAway time.Duration // > 0: the current session was ended on purpose

	// The rest belongs to the viewer's goroutine (Finish reads it after
	// that ended).
	connected int64 // unix nano of the first welcome frame
	closed    int64 // unix nano when the viewer ended for good before Finish
	gone      bool  // stopped coming back (no reconnects left, or they failed)
	awayAtEnd bool  // Finish came between a drop and its resume
	breaks    int   // sessions the server or the network ended
	sessions  int
	epoch     string   // the room's epoch as last heard
	behind    int64    // unix nano of the drop of a resumed session until its first live frame
	pos       int64    // the last position received in epoch
	replay    int      // replay handling until the first live frame
	bits      []uint64 // exact: messages received, by room sequence
	msgs      uint64
	frames    uint64
	bytes     uint64
	dups      uint64
	again     uint64 // second copies replayed after a rejoin without recovery
	history   uint64 // messages replayed at the first join (before the run)
	foreign   uint64 // messages without a load-test content
	misrouted uint64 // frames for another room
	notices   noticeBits
	lane      laneState
}

// resumeStats counts the drops and resumes of one pool.
type resumeStats struct {
	dropped, skipped, breaks, reconnects, resumeDials, freshDials atomic.Int64
	recoveredTrue, recoveredFalse, recoveredMissing, failed       atomic.Int64

	mu     sync.Mutex
	resume Hist // drop -> welcome
	redial Hist // dial -> welcome
	caught Hist // drop -> first live frame after the resume
}

// Pool holds one process's viewers.
type Pool struct {
	spec    PoolSpec
	viewers []*viewer
	shards  [shards]shard
	bufs    sync.Pool
	inflate *inflateCache // -compress: shared by the viewers

	connected atomic.Int64
	failed    atomic.Int64
	closed    atomic.Int64
	dialsDone atomic.Bool
	stopping  atomic.Bool
	away      atomic.Int64
	markNs    atomic.Int64
	cpuMark   float64
	rs        resumeStats

	// stop ends every wait and ctx every dial at Finish.
	stop    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	planned int

	mu       sync.Mutex
	failures map[string]int
	closes   map[string]int
	wg       sync.WaitGroup
}

// NewPool prepares the viewers of spec; Open connects them.
func NewPool(spec PoolSpec) *Pool {
	if spec.Dialers <= 0 {
		spec.Dialers = 64
	}
	if spec.DialTimeout <= 0 {
		spec.DialTimeout = 15 * time.Second
	}
	if spec.ExactEvery <= 0 {
		spec.ExactEvery = 1
	}
	p := &Pool{spec: spec, failures: map[string]int{}, closes: map[string]int{}, stop: make(chan struct{}),
		inflate: newInflateCache()}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.bufs.New = func() any { b := make([]byte, 0, 32<<10); return &b }
	for i := range p.shards {
		p.shards[i].perSec = map[int64]*secStat{}
	}
	l := &Layout{Viewers: spec.RoomViewers}
	for i := spec.From; i < spec.To; i++ {
		first := i % max(1, len(spec.Targets)-spec.Standby)
		v := &viewer{idx: i, room: l.ViewerRoom(i), exact: i%spec.ExactEvery == 0, target: first}
		v.lane.cap = tierOf(spec.Tiers, i)
		p.viewers = append(p.viewers, v)
	}
	return p
}

// Progress reports the ramp.
func (p *Pool) Progress() Progress {
	var d uint64
	for i := range p.shards {
		sh := &p.shards[i]
		sh.mu.Lock()
		d += sh.total
		sh.mu.Unlock()
	}
	return Progress{Connected: int(p.connected.Load()), Failed: int(p.failed.Load()),
		Closed: int(p.closed.Load()), Done: p.dialsDone.Load(), Delivered: d, Away: int(p.away.Load())}
}

// Open dials every viewer at the spec's rate and returns when every dial
// has finished (connected or failed). Connected viewers keep reading until
// Finish.
func (p *Pool) Open(ctx context.Context) {
	defer p.dialsDone.Store(true)
	sem := make(chan struct{}, p.spec.Dialers)
	start := time.Now()
	var dials sync.WaitGroup
	for k, v := range p.viewers {
		if p.spec.Rate > 0 {
			due := start.Add(time.Duration(float64(k) / p.spec.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		dials.Add(1)
		p.wg.Add(1)
		go func(v *viewer) {
			defer p.wg.Done()
			c, w, err := p.dial(ctx, v)
			<-sem
			dials.Done()
			if err == nil && p.install(v, c) {
				v.connected = time.Now().UnixNano()
				p.welcomed(v, w, false)
				p.connected.Add(1)
				p.live(v)
				return
			}
			if err == nil {
				return // Finish came first
			}
			p.failed.Add(1)
			p.mu.Lock()
			p.failures[err.Error()]++
			p.mu.Unlock()
		}(v)
	}
	dials.Wait()
}

// viewerReadBuffer is the kernel receive buffer of each viewer socket. A
// browser's is its own machine's memory; ten thousand viewers on one host
// with the kernel's auto-tuned buffers (up to tens of megabytes each) can
// hold gigabytes while the generator falls behind, and past net.ipv4.tcp_mem
// the kernel drops packets for every socket of the host, servers included.
const viewerReadBuffer = 256 << 10

// dial connects v (resuming from its position when it knows its room's
// epoch) and reads the welcome frame.
func (p *Pool) dial(ctx context.Context, v *viewer) (frameConn, welcome, error) {
	target := p.spec.Targets[v.target]
	nd := &net.Dialer{Timeout: p.spec.DialTimeout}
	if p.spec.SourceIPs > 1 {
		ip := net.IPv4(127, 0, 0, byte(p.spec.SourceBase+v.idx%p.spec.SourceIPs))
		nd.LocalAddr = &net.TCPAddr{IP: ip}
	}
	netDial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := c.(*net.TCPConn)
		tc.SetReadBuffer(viewerReadBuffer)
		return countConn{TCPConn: tc, n: &v.lane.wire}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.spec.DialTimeout)
	defer cancel()
	query := resumeQuery(p.spec.Rooms[v.room], v.epoch, v.pos, v.sessions > 0) + densityQuery(v.lane.cap) + uidQuery(p.spec.UserBase, p.spec.TokenSecret, v.idx)
	var c frameConn
	if p.spec.SSE {
		sc, resp, err := dialSSE(ctx, netDial, target, query, p.spec.DialTimeout)
		if err != nil {
			return nil, welcome{}, dialError(resp, err)
		}
		c = sc
	} else if p.spec.Compress {
		wc, resp, err := dialDeflate(ctx, netDial, target, query, p.spec.DialTimeout, p.inflate)
		if err != nil {
			return nil, welcome{}, dialError(resp, err)
		}
		c = wc
	} else {
		d := websocket.Dialer{
			NetDialContext:   netDial,
			HandshakeTimeout: p.spec.DialTimeout,
			ReadBufferSize:   4096,
			WriteBufferPool:  &sync.Pool{},
		}
		u := url.URL{Scheme: "ws", Host: target, Path: "/ws", RawQuery: query}
		ws, resp, err := d.DialContext(ctx, u.String(), http.Header{"Origin": {"http://" + target}})
		if err != nil {
			return nil, welcome{}, dialError(resp, err)
		}
		c = ws
	}
	c.SetReadDeadline(time.Now().Add(p.spec.DialTimeout))
	_, msg, err := c.ReadMessage()
	w, ok := parseWelcome(msg)
	if err != nil || !ok {
		abort(c)
		return nil, welcome{}, errors.New("no welcome frame")
	}
	c.SetReadDeadline(time.Time{})
	return c, w, nil
}

func dialError(resp *http.Response, err error) error {
	if resp != nil {
		return fmt.Errorf("handshake: %s", resp.Status)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("dial: timeout")
	}
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		return errors.New("dial: no free source port")
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return errors.New("dial: refused")
	}
	if errors.Is(err, syscall.EMFILE) {
		return errors.New("dial: too many open files")
	}
	return errors.New("dial: other error")
}

// live runs the viewer until Finish: it reads its session, and when the
// session ends by a planned drop, or (at most Reconnects times) by the
// server or the network, it stays away and resumes.
func (p *Pool) live(v *viewer) {
	for {
		err := p.read(v)
		dropped := time.Now()
		if p.stopping.Load() {
			return
		}
		v.mu.Lock()
		away := v.dropAway
		v.conn, v.dropAway = nil, 0
		v.mu.Unlock()
		if away == 0 {
			why := "read error"
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				why = "close " + strconv.Itoa(ce.Code)
			}
			p.closed.Add(1)
			p.mu.Lock()
			p.closes[why]++
			p.mu.Unlock()
			if v.breaks >= p.spec.Reconnects {
				v.gone = true
				v.closed = dropped.UnixNano()
				return
			}
			v.breaks++
			p.rs.breaks.Add(1)
			// A browser waits a moment before it reconnects.
			away = 100*time.Millisecond + rand.N(400*time.Millisecond)
		}
		if !p.resume(v, away, dropped) {
			return
		}
	}
}

// read is one session's loop: one pooled buffer per frame, a byte scan
// instead of a JSON decode. It returns the error that ended the session.
func (p *Pool) read(v *viewer) error {
	roomKey := []byte(`"room":"` + p.spec.Rooms[v.room] + `"`)
	sh := &p.shards[v.idx%shards]
	v.mu.Lock()
	c := v.conn
	v.mu.Unlock()
	if wc, ok := c.(*wsConn); ok {
		// The frame is read in place: a compressed one is the bytes the
		// process's viewers share, not a copy.
		for {
			_, b, err := wc.next()
			if err != nil {
				return err
			}
			p.frame(v, sh, b, time.Now().UnixNano(), roomKey)
		}
	}
	for {
		_, r, err := c.NextReader()
		if err != nil {
			return err
		}
		bp := p.bufs.Get().(*[]byte)
		b, err := readAll(r, (*bp)[:0])
		now := time.Now().UnixNano()
		if err == nil {
			p.frame(v, sh, b, now, roomKey)
		}
		*bp = b[:0]
		p.bufs.Put(bp)
	}
}

func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func (p *Pool) frame(v *viewer, sh *shard, b []byte, now int64, roomKey []byte) {
	v.frames++
	v.bytes += uint64(len(b))
	head := b
	if len(head) > 160 {
		head = head[:160]
	}
	if !bytes.Contains(head, []byte(`"op":"msgs"`)) {
		if p.spec.UserBase > 0 {
			p.noticeFrame(v, sh, b, now)
		}
		return
	}
	if !bytes.Contains(head, roomKey) {
		v.misrouted++
		return
	}
	v.track(b)
	if v.behind != 0 && !isReplay(b) {
		p.rs.mu.Lock()
		p.rs.caught.Add(time.Duration(now - v.behind))
		p.rs.mu.Unlock()
		v.behind = 0
	}
	mode := v.replay
	if mode != replayNone {
		if !isReplay(b) {
			v.replay, mode = replayNone, replayNone
		} else if mode == replaySkip {
			v.history += uint64(max(0, bytes.Count(b, []byte{'{'})-1))
			return
		}
	}
	sec := now / 1e9
	if p.spec.lanes() {
		sh.mu.Lock()
		st := sh.sec(sec)
		normal, high := p.laneFrame(v, sh, st, b, now, isReplay(b), mode == replayLenient)
		st.deliveries += normal + high
		sh.total += normal + high
		sh.mu.Unlock()
		v.msgs += normal
		return
	}
	if !v.exact {
		// Every message is one JSON object inside the frame's object, and
		// load-test contents hold no braces: counting one byte is a single
		// vectorised pass.
		n := uint64(max(0, bytes.Count(b, []byte{'{'})-1))
		v.msgs += n
		sh.mu.Lock()
		sh.sec(sec).deliveries += n
		sh.total += n
		sh.mu.Unlock()
		return
	}
	replayed := isReplay(b)
	sh.mu.Lock()
	st := sh.sec(sec)
	var n uint64
	for {
		seq, ns, rest, ok := nextLT(b)
		b = rest
		if !ok {
			break
		}
		n++
		if !setBit(&v.bits, seq) {
			if mode == replayLenient {
				v.again++
			} else {
				v.dups++
			}
			continue
		}
		lat := time.Duration(now - int64(ns))
		sh.hist.Add(lat)
		st.hist.Add(lat)
		if replayed {
			sh.replay.Add(lat)
		}
	}
	st.deliveries += n
	sh.total += n
	sh.mu.Unlock()
	v.msgs += n
	if n == 0 {
		v.foreign += uint64(max(0, bytes.Count(b, []byte{'{'})-1))
	}
}

func (sh *shard) sec(s int64) *secStat {
	st := sh.perSec[s]
	if st == nil {
		st = &secStat{}
		sh.perSec[s] = st
	}
	return st
}

// parseUint reads decimal digits up to the terminator end.
func parseUint(b []byte, end byte) (uint64, []byte, bool) {
	var x uint64
	for i, c := range b {
		if c == end && i > 0 {
			return x, b[i+1:], true
		}
		if c < '0' || c > '9' || i > 20 {
			return 0, b[i:], false
		}
		x = x*10 + uint64(c-'0')
	}
	return 0, nil, false
}

// Mark starts the accounting window: only viewers connected now and
// connected at Finish, every drop in between resumed, count toward expected
// deliveries. It also starts the planned drops of the sending period that
// follows.
func (p *Pool) Mark() {
	now := time.Now()
	p.markNs.Store(now.UnixNano())
	p.cpuMark = selfCPU()
	for _, v := range p.viewers {
		v.lane.wireAt = v.lane.wire.Load()
	}
	if drops := p.plan(); len(drops) > 0 {
		p.planned = len(drops)
		p.wg.Add(1)
		go p.schedule(now, drops)
	}
}
