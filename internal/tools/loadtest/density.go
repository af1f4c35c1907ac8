package loadtest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Per-viewer density and the priority lane (docs/protocol.md):
//
//   - A capped viewer dials with density=N and should get about N normal
//     messages a second of its room. It is held to that over capWindow
//     windows of the messages' send times (from the mark): the normal
//     messages it received that were sent in each full window, over the
//     window's length, against N. Its normal messages are not checked for
//     loss (they are thinned on purpose), only for duplicates (exact
//     viewers), and the "skipped" counts of its frames are summed.
//   - All-tier viewers (no density) are accounted as before: every
//     accepted normal message exactly once.
//   - High-priority messages carry "lh:<seq>:<unixnano>" and their own
//     sequence per room; every whole-time viewer, capped or not, must get
//     every accepted one exactly once.
//   - Wire bytes are what each viewer's socket read (WebSocket framing,
//     compressed or not), from the mark, so bytes per delivered comment
//     is what crosses the socket.

// capWindow is the window over which a capped viewer's rate is judged.
const capWindow = 10 * time.Second

// TierShare is a share of the viewers asking for at most Max normal
// messages a second (0: the all tier, every message).
type TierShare struct {
	Max   int     `json:"max"`
	Share float64 `json:"share"`
}

// ParseTiers reads a mix such as "30:0.99,all:0.01": cap (a number or
// "all") and share, the shares summing to 1.
func ParseTiers(s string) ([]TierShare, error) {
	if s == "" {
		return nil, nil
	}
	var out []TierShare
	sum := 0.0
	for _, part := range strings.Split(s, ",") {
		c, sh, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("tier %q: want CAP:SHARE", part)
		}
		t := TierShare{}
		if c != "all" {
			n, err := strconv.Atoi(c)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("tier %q: cap must be a positive number or all", part)
			}
			t.Max = n
		}
		f, err := strconv.ParseFloat(sh, 64)
		if err != nil || f <= 0 || f > 1 {
			return nil, fmt.Errorf("tier %q: share must be within (0, 1]", part)
		}
		t.Share = f
		sum += f
		out = append(out, t)
	}
	if math.Abs(sum-1) > 1e-6 {
		return nil, fmt.Errorf("tier shares sum to %g, want 1", sum)
	}
	return out, nil
}

// tierOf returns the cap of viewer i (0: all tier). The viewers of each
// tier are spread evenly over the indices (a golden-ratio sequence), so
// every comet and worker process gets its share.
func tierOf(mix []TierShare, i int) int {
	if len(mix) == 0 {
		return 0
	}
	x := math.Mod(float64(i)*0.6180339887498949, 1)
	for _, t := range mix {
		if x < t.Share {
			return t.Max
		}
		x -= t.Share
	}
	return mix[len(mix)-1].Max
}

// densityQuery is the density parameter of a capped viewer's dial.
func densityQuery(max int) string {
	if max <= 0 {
		return ""
	}
	return "&density=" + strconv.Itoa(max)
}

var skippedKey = []byte(`"skipped":`)

// nextLoad finds the next load-test content in b, normal ("lt:", high
// false) or high priority ("lh:"), and returns its numbers and what
// follows it.
func nextLoad(b []byte) (seq, ns uint64, high bool, rest []byte, ok bool) {
	for {
		i := bytes.IndexByte(b, 'l')
		if i < 0 {
			return 0, 0, false, b, false
		}
		if i+3 > len(b) || (b[i+1] != 't' && b[i+1] != 'h') || b[i+2] != ':' || i < len(anyContent) ||
			!bytes.Equal(b[i-len(anyContent):i], anyContent) {
			b = b[i+1:]
			continue
		}
		high = b[i+1] == 'h'
		b = b[i+3:]
		if seq, b, ok = parseUint(b, ':'); !ok {
			continue
		}
		if ns, b, ok = parseUint(b, '"'); !ok {
			continue
		}
		return seq, ns, high, b, true
	}
}

// frameSkipped returns the frame's "skipped" count (0 without one).
func frameSkipped(b []byte) uint64 {
	i := findKey(b, skippedKey)
	if i < 0 {
		return 0
	}
	var n uint64
	for _, c := range b[i:min(len(b), i+20)] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// laneState is a viewer's account of the high lane and, when capped, of
// its normal messages per window.
type laneState struct {
	cap     int      // 0: all tier
	hbits   []uint64 // high sequences received (a repeat counts in the viewer's dups)
	highs   uint64   // high messages received (first copies)
	wins    []uint32 // capped: normal messages by capWindow of their send time, from the mark
	skipped uint64   // the "skipped" counts of its frames, summed
	wire    atomic.Uint64
	wireAt  uint64 // wire at the mark
}

// laneFrame accounts a msgs frame b for v when the run has tiers or a
// high lane: its high messages and, for a capped viewer, its normal
// messages by window. It returns the first copies of normal and high
// messages it holds; lenient: a repeat is history overlapping after a
// rejoin without recovery, not a duplicate. sh is locked by the caller.
func (p *Pool) laneFrame(v *viewer, sh *shard, st *secStat, b []byte, now int64, replayed, lenient bool) (normal, high uint64) {
	mark := p.markNs.Load()
	v.lane.skipped += frameSkipped(b)
	repeat := func() {
		if lenient {
			v.again++
		} else {
			v.dups++
		}
	}
	for {
		seq, ns, isHigh, rest, ok := nextLoad(b)
		b = rest
		if !ok {
			return normal, high
		}
		lat := time.Duration(now - int64(ns))
		if isHigh {
			if !setBit(&v.lane.hbits, seq) {
				repeat()
				continue
			}
			high++
			v.lane.highs++
			sh.highHist.Add(lat)
			continue
		}
		if v.exact && !setBit(&v.bits, seq) {
			repeat()
			continue
		}
		normal++
		if v.lane.cap > 0 && mark > 0 && int64(ns) >= mark {
			w := int((int64(ns) - mark) / int64(capWindow))
			for len(v.lane.wins) <= w {
				v.lane.wins = append(v.lane.wins, 0)
			}
			v.lane.wins[w]++
		}
		if v.exact || v.lane.cap > 0 {
			sh.hist.Add(lat)
			st.hist.Add(lat)
			if replayed {
				sh.replay.Add(lat)
			}
		}
	}
}

// countConn counts the bytes read from a viewer's socket.
type countConn struct {
	*net.TCPConn
	n *atomic.Uint64
}

func (c countConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	c.n.Add(uint64(n))
	return n, err
}

// tcpOf returns the TCP connection under a viewer's socket.
func tcpOf(c net.Conn) (*net.TCPConn, bool) {
	switch t := c.(type) {
	case countConn:
		return t.TCPConn, true
	case *net.TCPConn:
		return t, true
	}
	return nil, false
}

// TierResult is what the whole-time viewers of one cap received.
type TierResult struct {
	Max     int `json:"max"` // 0: the all tier
	Viewers int `json:"viewers"`
	// Capped viewers: full windows judged, those within ±CapTolerance of
	// the cap, viewers all of whose windows were, and window rates over
	// the cap in 1/1000 steps (a histogram).
	Windows       int            `json:"windows,omitempty"`
	Within        int            `json:"windowsWithin,omitempty"`
	ViewersWithin int            `json:"viewersWithin,omitempty"`
	Ratios        map[int]uint64 `json:"ratioPermille,omitempty"`
	// ByWindow: the same per window of sending, in order (the first shows
	// how the thinning starts in a room that was quiet).
	ByWindow  []WindowStat `json:"byWindow,omitempty"`
	Normal    uint64       `json:"normalReceived"`
	Skipped   uint64       `json:"skipped"`
	WireBytes uint64       `json:"wireBytes"`
	Payload   uint64       `json:"payloadBytes"`
	Delivered uint64       `json:"delivered"` // normal and high messages since the mark
}

// WindowStat is one window of sending over the capped viewers of a tier:
// how many were judged, how many within the tolerance, and the sum of
// their rates over the cap.
type WindowStat struct {
	Viewers  int     `json:"viewers"`
	Within   int     `json:"within"`
	RatioSum float64 `json:"ratioSum"`
}

// CapTolerance is how far a capped viewer's window rate may be from its
// cap.
const CapTolerance = 0.05

func (t *TierResult) merge(o *TierResult) {
	t.Viewers += o.Viewers
	t.Windows += o.Windows
	t.Within += o.Within
	t.ViewersWithin += o.ViewersWithin
	t.Normal += o.Normal
	t.Skipped += o.Skipped
	t.WireBytes += o.WireBytes
	t.Payload += o.Payload
	t.Delivered += o.Delivered
	for len(t.ByWindow) < len(o.ByWindow) {
		t.ByWindow = append(t.ByWindow, WindowStat{})
	}
	for i, w := range o.ByWindow {
		t.ByWindow[i].Viewers += w.Viewers
		t.ByWindow[i].Within += w.Within
		t.ByWindow[i].RatioSum += w.RatioSum
	}
	for k, n := range o.Ratios {
		if t.Ratios == nil {
			t.Ratios = map[int]uint64{}
		}
		t.Ratios[k] += n
	}
}

// ratioQuantile returns the q quantile of the window rates over the cap.
func (t *TierResult) ratioQuantile(q float64) float64 {
	var keys []int
	var total uint64
	for k, n := range t.Ratios {
		keys = append(keys, k)
		total += n
	}
	if total == 0 {
		return 0
	}
	sort.Ints(keys)
	want := uint64(math.Ceil(q * float64(total)))
	var acc uint64
	for _, k := range keys {
		acc += t.Ratios[k]
		if acc >= max(want, 1) {
			return float64(k) / 1000
		}
	}
	return float64(keys[len(keys)-1]) / 1000
}

// tierResult adds whole-time viewer v to the tiers of res; full is the
// number of full windows of sending.
func (v *viewer) tierResult(res map[int]*TierResult, full int) {
	t := res[v.lane.cap]
	if t == nil {
		t = &TierResult{Max: v.lane.cap}
		res[v.lane.cap] = t
	}
	t.Viewers++
	t.Skipped += v.lane.skipped
	t.WireBytes += v.lane.wire.Load() - v.lane.wireAt
	t.Payload += v.bytes
	t.Delivered += v.msgs + v.lane.highs
	if v.lane.cap == 0 {
		return
	}
	t.Normal += v.msgs
	all := true
	for w := 0; w < full; w++ {
		var n uint32
		if w < len(v.lane.wins) {
			n = v.lane.wins[w]
		}
		r := float64(n) / capWindow.Seconds() / float64(v.lane.cap)
		if t.Ratios == nil {
			t.Ratios = map[int]uint64{}
		}
		t.Ratios[int(math.Round(r*1000))]++
		t.Windows++
		for len(t.ByWindow) <= w {
			t.ByWindow = append(t.ByWindow, WindowStat{})
		}
		bw := &t.ByWindow[w]
		bw.Viewers++
		bw.RatioSum += r
		if math.Abs(r-1) <= CapTolerance {
			t.Within++
			bw.Within++
		} else {
			all = false
		}
	}
	if all {
		t.ViewersWithin++
	}
}

// HighResult is the account of the high-priority lane.
type HighResult struct {
	Send      SendStats   `json:"send"`
	Viewers   int         `json:"viewers"` // whole-time viewers, every tier
	Expected  uint64      `json:"expected"`
	Delivered uint64      `json:"delivered"`
	Lost      uint64      `json:"lost"`
	Dups      uint64      `json:"duplicates"`
	Latency   Percentiles `json:"latencyMs"`
}

// errNoHighSender is returned when a high rate is asked without the
// admin secret high sends need.
var errNoHighSender = errors.New("-high-rate needs -admin-secret (high-priority sends go through logic with it)")

// WireStats is what crossed the viewers' sockets from the mark, per
// delivered message (normal and high) of the whole-time viewers.
type WireStats struct {
	Bytes           uint64  `json:"bytes"`
	Delivered       uint64  `json:"delivered"`
	PerDelivered    float64 `json:"bytesPerDelivered"`
	PayloadPerDeliv float64 `json:"payloadBytesPerDelivered"` // after decompression
	Compress        bool    `json:"compressionOffered"`
	// The comets' CPU over the sending and drain window per delivery
	// and per viewer-second of the whole-time viewers, in microseconds.
	CometUsPerDelivery     float64 `json:"cometUsPerDelivery"`
	CometUsPerViewerSecond float64 `json:"cometUsPerViewerSecond"`
}

// addLanes merges a worker's tiers and high-lane latencies into the
// report.
func (rep *Report) addLanes(r *PoolResult) {
	r.HighHist.addTo(&rep.highHist)
	for _, t := range r.Tiers {
		var into *TierResult
		for _, x := range rep.Tiers {
			if x.Max == t.Max {
				into = x
			}
		}
		if into == nil {
			into = &TierResult{Max: t.Max}
			rep.Tiers = append(rep.Tiers, into)
			sort.Slice(rep.Tiers, func(a, b int) bool { return rep.Tiers[a].Max < rep.Tiers[b].Max })
		}
		into.merge(t)
	}
}

// accountHigh checks every accepted high-priority message against every
// whole-time viewer of its room, and sums the wire figures.
func (rep *Report) accountHigh(high *sender, sendFor time.Duration, rooms map[int]*RoomResult) {
	if len(rep.Tiers) > 0 {
		w := &WireStats{Compress: rep.compress}
		var payload uint64
		for _, t := range rep.Tiers {
			w.Bytes += t.WireBytes
			w.Delivered += t.Delivered
			payload += t.Payload
		}
		var cometCPU, window float64
		viewers := 0
		for _, sv := range rep.Servers {
			if strings.HasPrefix(sv.Name, "comet") && sv.CPUPct > 0 {
				cometCPU += sv.CPUSeconds
				window = 100 * sv.CPUSeconds / sv.CPUPct
			}
		}
		for _, t := range rep.Tiers {
			viewers += t.Viewers
		}
		if w.Delivered > 0 {
			w.PerDelivered = float64(w.Bytes) / float64(w.Delivered)
			w.PayloadPerDeliv = float64(payload) / float64(w.Delivered)
			w.CometUsPerDelivery = 1e6 * cometCPU / float64(w.Delivered)
		}
		if viewers > 0 && window > 0 {
			w.CometUsPerViewerSecond = 1e6 * cometCPU / float64(viewers) / window
		}
		rep.Wire = w
	}
	if high == nil {
		return
	}
	h := &HighResult{Send: high.stats(sendFor)}
	for room, m := range rooms {
		h.Viewers += m.HighViewers
		if room >= len(high.accepted) {
			continue
		}
		eachAccepted(high.accepted[room], m.HighCounts, func(got uint32) {
			h.Expected += uint64(m.HighViewers)
			h.Delivered += uint64(got)
			h.Lost += uint64(m.HighViewers) - uint64(min(int(got), m.HighViewers))
		})
	}
	h.Latency = quantiles(&rep.highHist)
	rep.High = h
}

// highProblems: a high-priority message lost or repeated fails the run.
func (rep *Report) highProblems() []string {
	h := rep.High
	if h == nil {
		return nil
	}
	var out []string
	if h.Lost > 0 {
		out = append(out, fmt.Sprintf("%d high-priority deliveries lost", h.Lost))
	}
	if h.Send.Accepted == 0 {
		out = append(out, "no high-priority message accepted")
	}
	return out
}

// laneTargets: capped viewers within ±CapTolerance of their cap in every
// full window, and the high lane's p99.
func (rep *Report) laneTargets(c Config) []Target {
	var out []Target
	for _, t := range rep.Tiers {
		if t.Max == 0 || t.Windows == 0 {
			continue
		}
		out = append(out, Target{Name: fmt.Sprintf("cap %d/s: every viewer within ±%.0f%% over %s windows", t.Max, 100*CapTolerance, capWindow),
			Met: t.ViewersWithin == t.Viewers})
	}
	if c.TargetHighP99 > 0 && rep.High != nil {
		out = append(out, Target{Name: fmt.Sprintf("high p99 < %s", c.TargetHighP99),
			Met: rep.High.Latency.Count > 0 && rep.High.Latency.P99 < ms(c.TargetHighP99)})
	}
	return out
}

// printLanes writes the tiers, the high lane and the wire figures.
func (rep *Report) printLanes(p func(string, ...any)) {
	for _, t := range rep.Tiers {
		name := "all tier"
		if t.Max > 0 {
			name = fmt.Sprintf("cap %d/s", t.Max)
		}
		per := 0.0
		if t.Delivered > 0 {
			per = float64(t.WireBytes) / float64(t.Delivered)
		}
		p("tier %s: %d whole-time viewers, %d delivered (%.1f wire bytes each), skipped counts %d",
			name, t.Viewers, t.Delivered, per, t.Skipped)
		if t.Max > 0 && t.Windows > 0 {
			p("  normal messages per second over %s windows / cap: p1 %.3f  p50 %.3f  p99 %.3f  min %.3f  max %.3f;  windows within ±%.0f%% %d of %d;  viewers all within %d of %d",
				capWindow, t.ratioQuantile(0.01), t.ratioQuantile(0.5), t.ratioQuantile(0.99), t.ratioQuantile(0), t.ratioQuantile(1),
				100*CapTolerance, t.Within, t.Windows, t.ViewersWithin, t.Viewers)
			var ws []string
			for i, w := range t.ByWindow {
				ws = append(ws, fmt.Sprintf("%d: mean %.3f, %d of %d within", i+1, w.RatioSum/float64(max(w.Viewers, 1)), w.Within, w.Viewers))
			}
			p("  by window: %s", strings.Join(ws, ";  "))
		}
	}
	if h := rep.High; h != nil {
		s := h.Send
		p("high lane: sent %d accepted %d rejected %s errors %s; %d whole-time viewers: delivered %d of %d, LOST %d",
			s.Sent, s.Accepted, counts(s.Rejected), counts(s.Errors), h.Viewers, h.Delivered, h.Expected, h.Lost)
		l := h.Latency
		p("  high latency send->receipt ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  (%d samples)", l.P50, l.P90, l.P99, l.Max, l.Count)
	}
	if w := rep.Wire; w != nil {
		p("wire: %d bytes read by the whole-time viewers' sockets for %d deliveries: %.1f bytes per delivered comment (%.1f after decompression; permessage-deflate offered: %v)",
			w.Bytes, w.Delivered, w.PerDelivered, w.PayloadPerDeliv, w.Compress)
		p("  comets' CPU: %.2f us per delivery, %.2f us per viewer-second", w.CometUsPerDelivery, w.CometUsPerViewerSecond)
	}
}
