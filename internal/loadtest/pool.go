package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
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
	// to Targets[i%len(Targets)].
	Targets []string `json:"targets"`
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
}

// Progress is a snapshot of the ramp.
type Progress struct {
	Connected int  `json:"connected"`
	Failed    int  `json:"failed"`
	Closed    int  `json:"closed"`
	Done      bool `json:"done"` // every dial finished
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
	total  uint64 // messages received
	perSec map[int64]*secStat
}

type secStat struct {
	deliveries uint64
	hist       Hist
}

type viewer struct {
	idx       int
	room      int
	exact     bool
	conn      *websocket.Conn
	connected int64 // unix nano of the welcome frame
	closed    int64 // unix nano when the connection ended before Finish; 0 if open
	closeWhy  string
	bits      []uint64 // exact: messages received, by room sequence
	msgs      uint64
	frames    uint64
	bytes     uint64
	dups      uint64
	foreign   uint64 // messages without a load-test content
	misrouted uint64 // frames for another room
}

// Pool holds one process's viewers.
type Pool struct {
	spec    PoolSpec
	viewers []*viewer
	shards  [shards]shard
	bufs    sync.Pool

	connected atomic.Int64
	failed    atomic.Int64
	closed    atomic.Int64
	dialsDone atomic.Bool
	stopping  atomic.Bool
	markNs    atomic.Int64
	cpuMark   float64

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
	p := &Pool{spec: spec, failures: map[string]int{}, closes: map[string]int{}}
	p.bufs.New = func() any { b := make([]byte, 0, 32<<10); return &b }
	for i := range p.shards {
		p.shards[i].perSec = map[int64]*secStat{}
	}
	l := &Layout{Viewers: spec.RoomViewers}
	for i := spec.From; i < spec.To; i++ {
		p.viewers = append(p.viewers, &viewer{idx: i, room: l.ViewerRoom(i), exact: i%spec.ExactEvery == 0})
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
		Closed: int(p.closed.Load()), Done: p.dialsDone.Load(), Delivered: d}
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
			err := p.dial(ctx, v)
			<-sem
			dials.Done()
			if err != nil {
				p.failed.Add(1)
				p.mu.Lock()
				p.failures[err.Error()]++
				p.mu.Unlock()
				return
			}
			p.connected.Add(1)
			p.read(v)
		}(v)
	}
	dials.Wait()
}

func (p *Pool) dial(ctx context.Context, v *viewer) error {
	target := p.spec.Targets[v.idx%len(p.spec.Targets)]
	nd := &net.Dialer{Timeout: p.spec.DialTimeout}
	if p.spec.SourceIPs > 1 {
		ip := net.IPv4(127, 0, 0, byte(p.spec.SourceBase+v.idx%p.spec.SourceIPs))
		nd.LocalAddr = &net.TCPAddr{IP: ip}
	}
	d := websocket.Dialer{
		NetDialContext:   nd.DialContext,
		HandshakeTimeout: p.spec.DialTimeout,
		ReadBufferSize:   4096,
		WriteBufferPool:  &sync.Pool{},
	}
	ctx, cancel := context.WithTimeout(ctx, p.spec.DialTimeout)
	defer cancel()
	u := url.URL{Scheme: "ws", Host: target, Path: "/ws", RawQuery: "room=" + url.QueryEscape(p.spec.Rooms[v.room])}
	c, resp, err := d.DialContext(ctx, u.String(), http.Header{"Origin": {"http://" + target}})
	if err != nil {
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
	c.SetReadDeadline(time.Now().Add(p.spec.DialTimeout))
	_, msg, err := c.ReadMessage()
	if err != nil || !bytes.Contains(msg, []byte(`"op":"welcome"`)) {
		c.Close()
		return errors.New("no welcome frame")
	}
	c.SetReadDeadline(time.Time{})
	v.conn = c
	v.connected = time.Now().UnixNano()
	return nil
}

// read is the viewer's loop: one pooled buffer per frame, a byte scan
// instead of a JSON decode.
func (p *Pool) read(v *viewer) {
	roomKey := []byte(`"room":"` + p.spec.Rooms[v.room] + `"`)
	sh := &p.shards[v.idx%shards]
	for {
		_, r, err := v.conn.NextReader()
		if err != nil {
			if !p.stopping.Load() {
				v.closed = time.Now().UnixNano()
				why := "read error"
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					why = "close " + strconv.Itoa(ce.Code)
				}
				p.closed.Add(1)
				p.mu.Lock()
				p.closes[why]++
				p.mu.Unlock()
			}
			return
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
		return
	}
	if !bytes.Contains(head, roomKey) {
		v.misrouted++
		return
	}
	sec := now / 1e9
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
	sh.mu.Lock()
	st := sh.sec(sec)
	var n uint64
	// Find each "lt:" by its rare first byte rather than by the whole
	// `"content":"lt:` key, whose leading quote is in every JSON token.
	for {
		i := bytes.IndexByte(b, 'l')
		if i < 0 {
			break
		}
		if i+3 > len(b) || b[i+1] != 't' || b[i+2] != ':' || i < len(anyContent) || !bytes.Equal(b[i-len(anyContent):i], anyContent) {
			b = b[i+1:]
			continue
		}
		b = b[i+3:]
		seq, rest, ok := parseUint(b, ':')
		if !ok {
			continue
		}
		ns, rest, ok := parseUint(rest, '"')
		if !ok {
			continue
		}
		b = rest
		n++
		w, bit := seq/64, uint64(1)<<(seq%64)
		for uint64(len(v.bits)) <= w {
			v.bits = append(v.bits, 0)
		}
		if v.bits[w]&bit != 0 {
			v.dups++
			continue
		}
		v.bits[w] |= bit
		lat := time.Duration(now - int64(ns))
		sh.hist.Add(lat)
		st.hist.Add(lat)
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

// Mark starts the accounting window: only viewers connected now and still
// connected at Finish count toward expected deliveries.
func (p *Pool) Mark() {
	p.markNs.Store(time.Now().UnixNano())
	p.cpuMark = selfCPU()
}

// Finish closes every viewer (with an RST, so no port is left in
// TIME_WAIT for the next run) and returns what they received.
func (p *Pool) Finish() *PoolResult {
	cpu := selfCPU() - p.cpuMark
	p.stopping.Store(true)
	for _, v := range p.viewers {
		if v.conn != nil {
			if tc, ok := v.conn.NetConn().(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			v.conn.NetConn().Close()
		}
	}
	p.wg.Wait()
	mark := p.markNs.Load()
	res := &PoolResult{
		Connected: int(p.connected.Load()), Failed: int(p.failed.Load()), Closed: int(p.closed.Load()),
		Failures: p.failures, Closes: p.closes, Rooms: map[int]*RoomResult{},
		PerSec: map[int64]uint64{}, CPUSeconds: cpu, RSSBytes: selfRSS(),
	}
	for _, v := range p.viewers {
		res.Frames += v.frames
		res.Bytes += v.bytes
		res.Dups += v.dups
		res.Foreign += v.foreign
		res.Misrouted += v.misrouted
		if v.exact {
			res.ExactDelivered += v.msgs
		} else {
			res.CountedDelivered += v.msgs
		}
		if v.conn == nil {
			continue
		}
		whole := v.connected < mark && v.closed == 0
		if !whole {
			res.Partial++
			continue
		}
		rr := res.Rooms[v.room]
		if rr == nil {
			rr = &RoomResult{}
			res.Rooms[v.room] = rr
		}
		if !v.exact {
			rr.Counted++
			rr.CountedMsgs += v.msgs
			continue
		}
		rr.Exact++
		for w, word := range v.bits {
			for word != 0 {
				tz := bits.TrailingZeros64(word)
				seq := w*64 + tz
				for len(rr.Counts) <= seq {
					rr.Counts = append(rr.Counts, 0)
				}
				rr.Counts[seq]++
				word &^= 1 << uint(tz)
			}
		}
	}
	var h Hist
	secs := map[int64]*Hist{}
	for i := range p.shards {
		sh := &p.shards[i]
		h.Merge(&sh.hist)
		for s, st := range sh.perSec {
			res.PerSec[s] += st.deliveries
			if secs[s] == nil {
				secs[s] = &Hist{}
			}
			secs[s].Merge(&st.hist)
		}
	}
	res.Hist = h.sparse()
	res.SecHist = map[int64]sparse{}
	for s, sh := range secs {
		res.SecHist[s] = sh.sparse()
	}
	return res
}

// RoomResult is what the whole-time viewers of one room received.
type RoomResult struct {
	// Exact viewers and, per room sequence, how many of them got it.
	Exact  int      `json:"exact"`
	Counts []uint32 `json:"counts,omitempty"`
	// Counted viewers and the messages they got in total.
	Counted     int    `json:"counted"`
	CountedMsgs uint64 `json:"countedMsgs"`
}

// PoolResult is one process's viewer result.
type PoolResult struct {
	Connected        int                 `json:"connected"`
	Failed           int                 `json:"failed"`
	Closed           int                 `json:"closed"`
	Partial          int                 `json:"partial"`
	Failures         map[string]int      `json:"failures"`
	Closes           map[string]int      `json:"closes"`
	Frames           uint64              `json:"frames"`
	Bytes            uint64              `json:"bytes"`
	Dups             uint64              `json:"dups"`
	Foreign          uint64              `json:"foreign"`
	Misrouted        uint64              `json:"misrouted"`
	ExactDelivered   uint64              `json:"exactDelivered"`
	CountedDelivered uint64              `json:"countedDelivered"`
	Rooms            map[int]*RoomResult `json:"rooms"`
	PerSec           map[int64]uint64    `json:"perSec"`
	Hist             sparse              `json:"hist"`
	SecHist          map[int64]sparse    `json:"secHist"`
	CPUSeconds       float64             `json:"cpuSeconds"`
	RSSBytes         int64               `json:"rssBytes"`
}
