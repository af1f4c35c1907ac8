package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report is the outcome of one run, printed and written as JSON.
type Report struct {
	Scenario   string    `json:"scenario"`
	Command    string    `json:"command,omitempty"`
	Label      string    `json:"label,omitempty"` // free text, e.g. the job settings
	Started    time.Time `json:"started"`
	Viewers    int       `json:"viewers"`
	Rooms      int       `json:"rooms"`
	Comets     int       `json:"comets"`
	Rate       float64   `json:"rate"`
	DurationS  float64   `json:"durationSeconds"`
	Processes  int       `json:"viewerProcesses"`
	Accounting string    `json:"accounting"`
	RampS      float64   `json:"rampSeconds"`
	DrainS     float64   `json:"drainSeconds"`

	ViewerStats ViewerStats `json:"viewerStats"`
	Send        SendStats   `json:"send"`

	// Deliveries are message x viewer pairs.
	Delivered           uint64 `json:"delivered"` // by every viewer, also those not connected the whole time
	Expected            uint64 `json:"expected"`
	ExactDelivered      uint64 `json:"exactDelivered"` // by the whole-time exact viewers
	ExpectedExact       uint64 `json:"expectedExact"`
	Lost                uint64 `json:"lost"`
	Duplicates          uint64 `json:"duplicates"`
	DeliveredUnaccepted uint64 `json:"deliveredUnaccepted"` // the sender gave up, the message still came
	// Second copies in the history a comet replays after a rejoin without
	// recovery (the client drops them by id), and messages replayed at a
	// viewer's first join (older than the run): neither is accounted.
	ReplayedAgain uint64 `json:"replayedAgain,omitempty"`
	History       uint64 `json:"history,omitempty"`
	// Resume: drops, reconnects and their latency; nil without any.
	Resume *ResumeStats `json:"resume,omitempty"`
	// Counted viewers (sample mode): messages expected minus received.
	ExpectedCounted  uint64 `json:"expectedCounted"`
	CountedDelivered uint64 `json:"countedDelivered"`
	CountedMissing   int64  `json:"countedMissing"`
	// Accepted messages no whole-time viewer got; those the job counted as
	// dropped by its policy (cooldown) are not lost.
	UndeliveredMessages     uint64             `json:"undeliveredMessages"`
	PolicyDroppedMessages   uint64             `json:"policyDroppedMessages"`
	PolicyDroppedDeliveries uint64             `json:"policyDroppedDeliveries"`
	JobDropped              map[string]float64 `json:"jobDropped,omitempty"`
	Frames                  uint64             `json:"frames"`
	Bytes                   uint64             `json:"bytes"`
	// Compressed messages the viewers inflated, and those they took
	// already inflated from another viewer of their process (the same
	// compressed bytes; -compress).
	Inflated      uint64 `json:"inflatedMessages,omitempty"`
	InflateShared uint64 `json:"inflateShared,omitempty"`
	Foreign       uint64 `json:"foreignMessages"`
	Misrouted     uint64 `json:"misroutedFrames"`

	Latency Percentiles `json:"latencyMs"`
	// Latency split by how the messages came: live frames, and replay
	// frames (a resume, history, a slow viewer's catch-up), whose
	// send->receipt time includes the time the viewer was away or behind.
	LiveLatency    Percentiles `json:"liveLatencyMs"`
	ReplayLatency  Percentiles `json:"replayLatencyMs"`
	DeliveriesPerS Spread      `json:"deliveriesPerSecond"`

	Servers         []ServerStats `json:"servers,omitempty"`
	RSSPerConnKiB   float64       `json:"cometRssPerConnKiB,omitempty"`
	GeneratorCPUPct float64       `json:"generatorCpuPercent"`
	MachineCPUPct   float64       `json:"machineCpuPercent"` // all processes, 100 = one core
	Cores           int           `json:"cores"`
	RSSGeneratorMiB float64       `json:"generatorRssMiB"`
	Redis           *RedisStats   `json:"redis,omitempty"`
	RedisIdle       *RedisStats   `json:"redisIdle,omitempty"` // over -idle, with viewers and no messages

	// MachineSendCPUPct is MachineCPUPct over the sending alone: the
	// figures above also count the drain, where a closed loop idles.
	MachineSendCPUPct float64 `json:"machineSendCpuPercent"`

	// Notices of a notice run (U1): user pushes and broadcasts; their
	// deliveries, losses and duplicates are also in the totals above.
	Notices *NoticeStats `json:"notices,omitempty"`

	// Density tiers, the high-priority lane and the bytes on the wire
	// (density.go); nil or empty unless the run has tiers or a high rate.
	Tiers    []*TierResult `json:"tiers,omitempty"`
	High     *HighResult   `json:"high,omitempty"`
	Wire     *WireStats    `json:"wire,omitempty"`
	highHist Hist
	compress bool

	Ingest        []IngestStep `json:"ingest,omitempty"`
	MaxIngestPerS float64      `json:"maxIngestPerSecondP99Under50ms,omitempty"`

	Series   []SecPoint `json:"series"`
	Targets  []Target   `json:"targets,omitempty"`
	Pass     bool       `json:"pass"`
	Problems []string   `json:"problems,omitempty"`
	// HistoryRepeats is the number of message ids the rooms' Redis
	// histories hold at a second position after the run (nil: not read).
	HistoryRepeats *int     `json:"historyRepeatedIds,omitempty"`
	Notes          []string `json:"notes,omitempty"`
}

// ViewerStats counts the viewers.
type ViewerStats struct {
	Connected        int            `json:"connected"`
	Failed           int            `json:"failed"`
	Failures         map[string]int `json:"failures,omitempty"`
	ClosedEarly      int            `json:"closedEarly"`
	Closes           map[string]int `json:"closes,omitempty"`
	NotWholeTime     int            `json:"notWholeTime"`
	WholeTimeExact   int            `json:"wholeTimeExact"`
	WholeTimeCounted int            `json:"wholeTimeCounted"`
}

// ResumeStats are the viewers' drops and resumes: counts, the time from a
// drop to the welcome of the resumed session (away time included), from
// the re-dial to that welcome, and from the drop to the first live frame
// after the replay (the viewer has caught up).
type ResumeStats struct {
	ResumeCounts
	ResumeMs   Percentiles `json:"resumeMs"`
	RedialMs   Percentiles `json:"redialMs"`
	CaughtUpMs Percentiles `json:"caughtUpMs"`
}

// Percentiles of the send-to-receipt latency in milliseconds.
type Percentiles struct {
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
	Count uint64  `json:"count"`
}

// Spread of a per-second figure over the full seconds of sending.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// ServerStats is one watched process.
type ServerStats struct {
	Name       string  `json:"name"`
	PID        string  `json:"pid"`
	CPUPct     float64 `json:"cpuPercent"` // while sending and draining
	CPUSeconds float64 `json:"cpuSeconds"` // the same window
	// CPUUsPerMsg is CPUSeconds in microseconds per accepted message.
	CPUUsPerMsg  float64 `json:"cpuUsPerAcceptedMessage,omitempty"`
	IdleCPUPct   float64 `json:"idleCpuPercent"` // during the idle phase
	RSSBeforeMiB float64 `json:"rssBeforeMiB"`   // before the viewers connected
	RSSRampMiB   float64 `json:"rssAfterRampMiB"`
	RSSEndMiB    float64 `json:"rssEndMiB"`
	HWMMiB       float64 `json:"peakRssMiB"`
	Error        string  `json:"error,omitempty"`
}

// RedisStats is INFO commandstats over the sending window (or the idle
// one), summed over the nodes given.
type RedisStats struct {
	Commands   int64            `json:"commands"`
	PerMessage float64          `json:"perAcceptedMessage"`
	PerSecond  float64          `json:"perSecond,omitempty"` // idle window only
	ByCommand  map[string]int64 `json:"byCommand"`
	ByNode     map[string]int64 `json:"byNode,omitempty"` // commands per node, with more than one
}

// IngestStep is one stage of the ingest mode.
type IngestStep struct {
	Step    string  `json:"step"`
	Offered float64 `json:"offeredPerSecond,omitempty"`
	Conc    int     `json:"concurrency,omitempty"`
	SendStats
}

// SecPoint is one second of the run, T relative to the start of sending.
type SecPoint struct {
	T          int64   `json:"t"`
	Deliveries uint64  `json:"deliveries"`
	P50        float64 `json:"p50Ms"`
	P90        float64 `json:"p90Ms"`
	P99        float64 `json:"p99Ms"`
}

// Target is a goal of the scenario, met or not.
type Target struct {
	Name string `json:"name"`
	Met  bool   `json:"met"`
}

func (rep *Report) serverStats(ps []Proc, before, ramp []procSample, idle time.Duration, idleEnd, mark, end []procSample) {
	var cometDelta float64
	for i, p := range ps {
		s := ServerStats{Name: p.Name, PID: p.PID}
		if end[i].err != nil {
			s.Error = end[i].err.Error()
			rep.Servers = append(rep.Servers, s)
			continue
		}
		if el := end[i].at.Sub(mark[i].at).Seconds(); el > 0 {
			s.CPUPct = 100 * (end[i].cpu - mark[i].cpu) / el
			s.CPUSeconds = end[i].cpu - mark[i].cpu
		}
		if idle > 0 {
			if el := idleEnd[i].at.Sub(ramp[i].at).Seconds(); el > 0 {
				s.IdleCPUPct = 100 * (idleEnd[i].cpu - ramp[i].cpu) / el
			}
		}
		s.RSSBeforeMiB = float64(before[i].rss) / (1 << 20)
		s.RSSRampMiB = float64(ramp[i].rss) / (1 << 20)
		s.RSSEndMiB = float64(end[i].rss) / (1 << 20)
		s.HWMMiB = float64(end[i].hwm) / (1 << 20)
		if strings.HasPrefix(p.Name, "comet") {
			cometDelta += float64(ramp[i].rss - before[i].rss)
		}
		rep.Servers = append(rep.Servers, s)
	}
	if rep.Viewers > 0 && cometDelta > 0 && before != nil {
		// Filled in after the viewers are counted; see Finalize.
		rep.RSSPerConnKiB = cometDelta / 1024
	}
}

// Finalize completes figures that need the viewer count.
func (rep *Report) Finalize() {
	if rep.Send.Accepted > 0 {
		for i := range rep.Servers {
			rep.Servers[i].CPUUsPerMsg = 1e6 * rep.Servers[i].CPUSeconds / float64(rep.Send.Accepted)
		}
	}
	if rep.RSSPerConnKiB > 0 && rep.ViewerStats.Connected > 0 {
		rep.RSSPerConnKiB /= float64(rep.ViewerStats.Connected)
	}
}

// Print writes the human-readable report.
func (rep *Report) Print(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("== %s %s (%s)", rep.Scenario, rep.Label, rep.Started.Format(time.RFC3339))
	if rep.Command != "" {
		p("command: %s", rep.Command)
	}
	p("viewers %d on %d comet(s) in %d room(s), %d viewer process(es); ramp %.1fs", rep.Viewers, rep.Comets, rep.Rooms, rep.Processes, rep.RampS)
	v := rep.ViewerStats
	p("  connected %d  failed %d%s  closed early %d%s  whole-time %d exact + %d counted",
		v.Connected, v.Failed, parts(v.Failures), v.ClosedEarly, parts(v.Closes), v.WholeTimeExact, v.WholeTimeCounted)
	p("  accounting: %s", rep.Accounting)
	s := rep.Send
	p("send: sent %d accepted %d rejected %s errors %s (%.0f/s over %.1fs); late sends %d (max lag %.1f ms)",
		s.Sent, s.Accepted, counts(s.Rejected), counts(s.Errors), s.AcceptedPerS, s.DurationS, s.LateSends, s.MaxLagMs)
	if rep.DrainS > 0 {
		p("  drain %.1fs (until deliveries stopped)", rep.DrainS)
	}
	if len(rep.Ingest) > 0 {
		p("  (whole ingest run: worst step p99 and max below)")
	}
	p("  POST latency p50 %.2f ms  p99 %.2f ms  max %.1f ms", s.PostP50Ms, s.PostP99Ms, s.PostMaxMs)
	for _, st := range rep.Ingest {
		p("  ingest %-22s accepted %8.0f msg/s (%6.0f req/s)  p50 %6.2f ms  p99 %7.2f ms  late %d  took %.1fs  rejected %s errors %s",
			st.Step, st.AcceptedPerS, float64(st.Posts)/math.Max(st.DurationS, 1e-9), st.PostP50Ms, st.PostP99Ms, st.LateSends, st.DurationS, counts(st.Rejected), counts(st.Errors))
	}
	if rep.MaxIngestPerS > 0 {
		p("  max accepted msg/s with p99 < 50 ms: %.0f", rep.MaxIngestPerS)
	}
	if rep.Viewers > 0 {
		p("deliveries: delivered %d (all viewers)  expected %d (whole-time viewers; exact ones got %d of %d)",
			rep.Delivered, rep.Expected, rep.ExactDelivered, rep.ExpectedExact)
		p("  LOST %d  DUPLICATES %d  counted-missing %d  misrouted frames %d  unaccepted-but-delivered %d",
			rep.Lost, rep.Duplicates, rep.CountedMissing, rep.Misrouted, rep.DeliveredUnaccepted)
		p("  undelivered messages %d, of which job policy drops %d (%d deliveries); job dropped %s",
			rep.UndeliveredMessages, rep.PolicyDroppedMessages, rep.PolicyDroppedDeliveries, counts(rep.JobDropped))
		if rep.ReplayedAgain+rep.History > 0 {
			p("  replayed again after a rejoin without recovery %d (not duplicates); history before the run %d", rep.ReplayedAgain, rep.History)
		}
		if r := rep.Resume; r != nil {
			p("resume: drops %d of %d planned (%d skipped), cuts by server/network %d; reconnects %d (resume dials %d, fresh %d), failed %d, away at end %d",
				r.Dropped, r.Planned, r.Skipped, r.Breaks, r.Reconnects, r.ResumeDials, r.FreshDials, r.Failed, r.AwayAtEnd)
			p("  welcomes of resume dials: recovered:true %d  recovered:false %d  no recovered field %d",
				r.RecoveredTrue, r.RecoveredFalse, r.RecoveredMissing)
			p("  drop->welcome ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f;  re-dial->welcome ms: p50 %.1f  p99 %.1f  max %.1f",
				r.ResumeMs.P50, r.ResumeMs.P90, r.ResumeMs.P99, r.ResumeMs.Max, r.RedialMs.P50, r.RedialMs.P99, r.RedialMs.Max)
			if c := r.CaughtUpMs; c.Count > 0 {
				p("  drop->caught up (first live frame after the replay) ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  (%d resumes)",
					c.P50, c.P90, c.P99, c.Max, c.Count)
			}
		}
		rep.printNotices(p)
		rep.printLanes(p)
		l := rep.Latency
		p("latency send->receipt ms: p50 %.1f  p90 %.1f  p99 %.1f  p999 %.1f  max %.1f  (%d samples)", l.P50, l.P90, l.P99, l.P999, l.Max, l.Count)
		if r := rep.ReplayLatency; r.Count > 0 {
			l := rep.LiveLatency
			p("  live frames: p50 %.1f  p99 %.1f  max %.1f (%d);  replay frames: p50 %.1f  p99 %.1f  max %.1f (%d)",
				l.P50, l.P99, l.Max, l.Count, r.P50, r.P99, r.Max, r.Count)
		}
		d := rep.DeliveriesPerS
		p("deliveries/s: median %.0f  min %.0f  max %.0f;  frames %d  bytes %.1f MiB", d.Median, d.Min, d.Max, rep.Frames, float64(rep.Bytes)/(1<<20))
		if rep.Inflated+rep.InflateShared > 0 {
			p("compressed messages: %d inflated, %d taken inflated from another viewer of the same bytes", rep.Inflated, rep.InflateShared)
		}
	}
	for _, sv := range rep.Servers {
		if sv.Error != "" {
			p("  %-10s pid %s: %s", sv.Name, sv.PID, sv.Error)
			continue
		}
		p("  %-10s pid %-7s cpu %5.1f%% (%.1f us per accepted message)  idle cpu %4.1f%%  rss %.0f -> %.0f -> %.0f MiB (peak %.0f)",
			sv.Name, sv.PID, sv.CPUPct, sv.CPUUsPerMsg, sv.IdleCPUPct, sv.RSSBeforeMiB, sv.RSSRampMiB, sv.RSSEndMiB, sv.HWMMiB)
	}
	if rep.RSSPerConnKiB > 0 {
		p("  comet RSS per connection: %.1f KiB", rep.RSSPerConnKiB)
	}
	p("generator cpu %.0f%% (all its processes), viewer rss %.0f MiB; whole machine %.0f%% of %d00%% (%.0f%% while sending)",
		rep.GeneratorCPUPct, rep.RSSGeneratorMiB, rep.MachineCPUPct, rep.Cores, rep.MachineSendCPUPct)
	if rep.HistoryRepeats != nil {
		p("room histories after the run: %d message ids at a second position", *rep.HistoryRepeats)
	}
	if rep.Redis != nil {
		p("redis: %d commands, %.2f per accepted message (%s)", rep.Redis.Commands, rep.Redis.PerMessage, commandList(rep.Redis.ByCommand))
		if len(rep.Redis.ByNode) > 0 {
			p("  per node: %s", nodeShares(rep.Redis))
		}
	}
	if rep.RedisIdle != nil {
		p("redis while idle: %.1f commands/s (%d over the idle window: %s)", rep.RedisIdle.PerSecond, rep.RedisIdle.Commands, commandList(rep.RedisIdle.ByCommand))
		if len(rep.RedisIdle.ByNode) > 0 {
			p("  per node: %s", nodeShares(rep.RedisIdle))
		}
	}
	for _, t := range rep.Targets {
		res := "MET"
		if !t.Met {
			res = "MISSED"
		}
		p("target %-28s %s", t.Name, res)
	}
	for _, n := range rep.Notes {
		p("note: %s", n)
	}
	if rep.Pass {
		p("RESULT: PASS")
	} else {
		p("RESULT: FAIL: %s", strings.Join(rep.Problems, "; "))
	}
}

// WriteJSON writes the report to path.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteSVG draws deliveries per second and latency percentiles per second.
func (rep *Report) WriteSVG(path string) error {
	const W, H, pad, gap = 900, 560, 60, 40
	ph := (H - 2*pad - gap) / 2
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="20" font-size="14">%s: %d viewers, %d room(s), %d comet(s), %.0f msg/s %s</text>`+"\n",
		pad, esc(rep.Scenario), rep.Viewers, rep.Rooms, rep.Comets, rep.Rate, esc(rep.Label))
	pts := rep.Series
	if len(pts) == 0 {
		b.WriteString("</svg>\n")
		return os.WriteFile(path, []byte(b.String()), 0o644)
	}
	t0, t1 := pts[0].T, pts[len(pts)-1].T
	if t1 == t0 {
		t1 = t0 + 1
	}
	x := func(t int64) float64 { return pad + float64(t-t0)*float64(W-2*pad)/float64(t1-t0) }
	var maxD, maxL float64
	for _, s := range pts {
		maxD = math.Max(maxD, float64(s.Deliveries))
		maxL = math.Max(maxL, s.P99)
	}
	maxD, maxL = nice(maxD), nice(maxL)
	panel := func(top int, title string, max float64, unit string) {
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", pad, top-6, title)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", pad, top, W-2*pad, ph)
		for k := 0; k <= 4; k++ {
			y := float64(top) + float64(ph)*(1-float64(k)/4)
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
				pad, W-pad, y, y, pad-4, y+4, axisLabel(max*float64(k)/4, unit))
		}
		for t := t0; t <= t1; t++ {
			if (t1-t0) > 20 && t%5 != 0 {
				continue
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%ds</text>`+"\n", x(t), top+ph+14, t)
		}
	}
	line := func(top int, max float64, color string, val func(SecPoint) float64) {
		b.WriteString(`<polyline fill="none" stroke-width="1.5" stroke="` + color + `" points="`)
		for _, s := range pts {
			y := float64(top) + float64(ph)*(1-val(s)/max)
			fmt.Fprintf(&b, "%.1f,%.1f ", x(s.T), y)
		}
		b.WriteString("\"/>\n")
	}
	top1 := pad
	panel(top1, "deliveries per second (message x viewer)", maxD, "")
	line(top1, maxD, "#1f77b4", func(s SecPoint) float64 { return float64(s.Deliveries) })
	top2 := pad + ph + gap
	panel(top2, `latency send→receipt per second: <tspan fill="#2ca02c">p50</tspan> <tspan fill="#ff7f0e">p90</tspan> <tspan fill="#d62728">p99</tspan>`, maxL, "ms")
	line(top2, maxL, "#2ca02c", func(s SecPoint) float64 { return s.P50 })
	line(top2, maxL, "#ff7f0e", func(s SecPoint) float64 { return s.P90 })
	line(top2, maxL, "#d62728", func(s SecPoint) float64 { return s.P99 })
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func axisLabel(v float64, unit string) string {
	if unit == "ms" {
		return trimmed(v) + " ms"
	}
	return short(v) + unit
}

// trimmed writes v with at most two decimals and no trailing zeros: a
// tick at 2.5 reads 2.5, not 2 or 3.
func trimmed(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

func nice(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return trimmed(v/1e6) + "M"
	case v >= 1e3:
		return trimmed(v/1e3) + "k"
	}
	return trimmed(v)
}

// counts writes a tally as its total and its parts in key order,
// "5 (429: 3, 503: 2)", or "0": never Go's map[...] notation.
func counts[V int | int64 | float64](m map[string]V) string {
	var total V
	for _, v := range m {
		total += v
	}
	return fmt.Sprint(total) + parts(m)
}

// parts writes a tally's parts in key order, " (429: 3, 503: 2)", or
// nothing when it is empty.
func parts[V int | int64 | float64](m map[string]V) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s: %v", k, m[k])
	}
	return " (" + strings.Join(out, ", ") + ")"
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// commandList is "cmd=n ..." ordered by count, largest first.
func commandList(by map[string]int64) string {
	var keys []string
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return by[keys[a]] > by[keys[b]] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, by[k])
	}
	return strings.Join(parts, " ")
}

// nodeShares is "addr n (p%) ..." in address order.
func nodeShares(rs *RedisStats) string {
	var nodes []string
	for k := range rs.ByNode {
		nodes = append(nodes, k)
	}
	sort.Strings(nodes)
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s %d (%.0f%%)", n, rs.ByNode[n], 100*float64(rs.ByNode[n])/float64(max(rs.Commands, 1)))
	}
	return strings.Join(parts, ", ")
}
