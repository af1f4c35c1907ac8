package loadtest

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"time"
)

// account turns the viewers' results into deliveries, losses and
// duplicates.
func (rep *Report) account(l *Layout, snd, high *sender, results []*PoolResult, sendStart, sendEnd time.Time) {
	var hist, replayed, resume, redial, caught Hist
	perSec := map[int64]uint64{}
	secHist := map[int64]*Hist{}
	rooms := map[int]*RoomResult{}
	v := &rep.ViewerStats
	rs := &ResumeStats{}
	v.Failures, v.Closes = map[string]int{}, map[string]int{}
	for _, r := range results {
		v.Connected += r.Connected
		v.Failed += r.Failed
		v.ClosedEarly += r.Closed
		v.NotWholeTime += r.Partial
		for k, n := range r.Failures {
			v.Failures[k] += n
		}
		for k, n := range r.Closes {
			v.Closes[k] += n
		}
		rep.Frames += r.Frames
		rep.Inflated += r.Inflated
		rep.InflateShared += r.InflateShared
		rep.Bytes += r.Bytes
		rep.Duplicates += r.Dups
		rep.ReplayedAgain += r.Again
		rep.History += r.History
		rs.ResumeCounts.add(r.Resume)
		r.ResumeHist.addTo(&resume)
		r.RedialHist.addTo(&redial)
		r.CaughtUpHist.addTo(&caught)
		rep.Foreign += r.Foreign
		rep.Misrouted += r.Misrouted
		rep.Delivered += r.ExactDelivered + r.CountedDelivered
		rep.RSSGeneratorMiB += float64(r.RSSBytes) / (1 << 20)
		r.Hist.addTo(&hist)
		r.ReplayHist.addTo(&replayed)
		rep.addLanes(r)
		for s, n := range r.PerSec {
			perSec[s] += n
		}
		for s, sh := range r.SecHist {
			if secHist[s] == nil {
				secHist[s] = &Hist{}
			}
			sh.addTo(secHist[s])
		}
		for room, rr := range r.Rooms {
			m := rooms[room]
			if m == nil {
				m = &RoomResult{}
				rooms[room] = m
			}
			m.Exact += rr.Exact
			m.Counted += rr.Counted
			m.CountedMsgs += rr.CountedMsgs
			addCounts(&m.Counts, rr.Counts)
			m.HighViewers += rr.HighViewers
			addCounts(&m.HighCounts, rr.HighCounts)
		}
	}
	// Messages no whole-time viewer received at all: under the drop policy
	// the job skipped them on purpose (it counts them), otherwise lost.
	var undelivered, undeliveredDeliveries uint64
	for room, m := range rooms {
		bits := snd.accepted[room]
		acc := uint64(snd.acc[room])
		v.WholeTimeExact += m.Exact
		for _, n := range m.Counts {
			rep.ExactDelivered += uint64(n)
		}
		v.WholeTimeCounted += m.Counted
		rep.ExpectedExact += acc * uint64(m.Exact)
		rep.ExpectedCounted += acc * uint64(m.Counted)
		rep.CountedDelivered += m.CountedMsgs
		eachAccepted(bits, m.Counts, func(got uint32) {
			switch {
			case m.Exact == 0:
			case got == 0:
				undelivered++
				undeliveredDeliveries += uint64(m.Exact)
			default:
				rep.Lost += uint64(m.Exact) - uint64(got)
			}
		})
		for seq, n := range m.Counts {
			w, b := seq/64, uint(seq%64)
			if n > 0 && (w >= len(bits) || bits[w]&(1<<b) == 0) {
				rep.DeliveredUnaccepted += uint64(n)
			}
		}
	}
	rep.accountHigh(high, sendEnd.Sub(sendStart), rooms)
	policy := uint64(rep.JobDropped["cooldown"])
	rep.UndeliveredMessages = undelivered
	if undelivered > 0 {
		per := float64(undeliveredDeliveries) / float64(undelivered)
		pd := min(policy, undelivered)
		rep.PolicyDroppedMessages = pd
		rep.PolicyDroppedDeliveries = uint64(math.Round(float64(pd) * per))
		rep.Lost += undeliveredDeliveries - rep.PolicyDroppedDeliveries
	}
	if rep.ExpectedCounted > 0 {
		// The counted viewers only know how many messages they got; under
		// the drop policy their share of policy drops is expected.
		exp := int64(rep.ExpectedCounted)
		if rep.ExpectedExact > 0 && rep.PolicyDroppedDeliveries > 0 {
			exp -= int64(float64(rep.PolicyDroppedDeliveries) * float64(rep.ExpectedCounted) / float64(rep.ExpectedExact))
		}
		rep.CountedMissing = exp - int64(rep.CountedDelivered)
	}
	rep.Expected = rep.ExpectedExact + rep.ExpectedCounted

	if rs.Planned+rs.Breaks+rs.Reconnects+rs.Failed > 0 {
		rs.ResumeMs = quantiles(&resume)
		rs.RedialMs = quantiles(&redial)
		rs.CaughtUpMs = quantiles(&caught)
		rep.Resume = rs
	}
	rep.Latency = quantiles(&hist)
	rep.ReplayLatency = quantiles(&replayed)
	rep.LiveLatency = quantiles(hist.minus(&replayed))

	var secs []int64
	for s := range perSec {
		secs = append(secs, s)
	}
	for s := range secHist {
		if _, ok := perSec[s]; !ok {
			secs = append(secs, s)
		}
	}
	sort.Slice(secs, func(a, b int) bool { return secs[a] < secs[b] })
	var full []float64
	for _, s := range secs {
		h := secHist[s]
		if h == nil {
			h = &Hist{}
		}
		rep.Series = append(rep.Series, SecPoint{T: s - sendStart.Unix(), Deliveries: perSec[s],
			P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99)})
		if s > sendStart.Unix() && s < sendEnd.Unix() {
			full = append(full, float64(perSec[s]))
		}
	}
	if len(full) > 0 {
		sort.Float64s(full)
		rep.DeliveriesPerS = Spread{Median: full[len(full)/2], Min: full[0], Max: full[len(full)-1]}
	}
}

// eachAccepted calls fn for every sequence set in accepted with the
// number of viewers that got it (counts, by sequence).
func eachAccepted(accepted []uint64, counts []uint32, fn func(got uint32)) {
	for w, word := range accepted {
		for word != 0 {
			tz := bits.TrailingZeros64(word)
			var got uint32
			if seq := w*64 + tz; seq < len(counts) {
				got = counts[seq]
			}
			fn(got)
			word &^= 1 << uint(tz)
		}
	}
}

// addCounts adds counts o to m, index by index.
func addCounts(m *[]uint32, o []uint32) {
	for len(*m) < len(o) {
		*m = append(*m, 0)
	}
	for i, n := range o {
		(*m)[i] += n
	}
}

func (rep *Report) judge(c Config) {
	if rep.Lost > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d deliveries lost", rep.Lost))
	}
	if rep.Duplicates > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d duplicates", rep.Duplicates))
	}
	if rep.CountedMissing != 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("counted viewers: %d deliveries missing (negative: extra)", rep.CountedMissing))
	}
	if r := rep.Resume; r != nil && r.Failed+r.AwayAtEnd > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d viewers did not come back after a drop", r.Failed+r.AwayAtEnd))
	}
	if rep.Misrouted > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d frames for another room", rep.Misrouted))
	}
	if n := rep.HistoryRepeats; n != nil && *n > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d message ids hold a second position in their room's history", *n))
	}
	if c.Viewers > 0 && rep.ViewerStats.WholeTimeExact == 0 && rep.Send.Accepted > 0 {
		rep.Problems = append(rep.Problems, "no viewer was connected the whole time")
	}
	if rep.Send.Accepted == 0 && rep.Notices == nil {
		rep.Problems = append(rep.Problems, "no message accepted")
	}
	rep.Problems = append(rep.Problems, rep.noticeProblems()...)
	rep.Problems = append(rep.Problems, rep.highProblems()...)
	rep.Pass = len(rep.Problems) == 0
	if c.TargetP99 > 0 {
		rep.Targets = append(rep.Targets, Target{Name: fmt.Sprintf("p99 < %s", c.TargetP99),
			Met: rep.Latency.Count > 0 && rep.Latency.P99 < ms(c.TargetP99)})
	}
	if c.TargetLiveP99 > 0 {
		rep.Targets = append(rep.Targets, Target{Name: fmt.Sprintf("live p99 < %s", c.TargetLiveP99),
			Met: rep.LiveLatency.Count > 0 && rep.LiveLatency.P99 < ms(c.TargetLiveP99)})
	}
	rep.Targets = append(rep.Targets, rep.laneTargets(c)...)
	if c.TargetDPS > 0 {
		rep.Targets = append(rep.Targets, Target{Name: fmt.Sprintf("deliveries/s >= %.0f", c.TargetDPS),
			Met: rep.DeliveriesPerS.Median >= c.TargetDPS})
	}
}

func quantiles(h *Hist) Percentiles {
	return Percentiles{P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99),
		P999: h.Quantile(0.999), Max: h.Max(), Count: h.Total()}
}
