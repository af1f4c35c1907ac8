package loadtest

import "math/bits"

// Finish closes every viewer (with an RST, so no port is left in
// TIME_WAIT for the next run) and returns what they received.
func (p *Pool) Finish() *PoolResult {
	cpu := selfCPU() - p.cpuMark
	p.stopping.Store(true)
	close(p.stop)
	p.cancel()
	for _, v := range p.viewers {
		v.mu.Lock()
		if v.conn != nil {
			abort(v.conn)
		}
		v.mu.Unlock()
	}
	p.wg.Wait()
	mark := p.markNs.Load()
	res := &PoolResult{
		Connected: int(p.connected.Load()), Failed: int(p.failed.Load()), Closed: int(p.closed.Load()),
		Failures: p.failures, Closes: p.closes, Rooms: map[int]*RoomResult{},
		PerSec: map[int64]uint64{}, CPUSeconds: cpu, RSSBytes: selfRSS(),
		Inflated: p.inflate.inflated.Load(), InflateShared: p.inflate.shared.Load(),
	}
	full := int(p.spec.SendFor / capWindow)
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
		res.Again += v.again
		res.History += v.history
		if v.awayAtEnd {
			res.Resume.AwayAtEnd++
		}
		if v.connected == 0 {
			continue
		}
		if !v.wholeTime(mark) {
			res.Partial++
			continue
		}
		rr := res.Rooms[v.room]
		if rr == nil {
			rr = &RoomResult{}
			res.Rooms[v.room] = rr
		}
		if p.spec.lanes() {
			res.laneResult(v, rr, full)
			if v.lane.cap > 0 {
				continue // its normal messages are thinned, not lost
			}
		}
		if !v.exact {
			rr.Counted++
			rr.CountedMsgs += v.msgs
			continue
		}
		rr.Exact++
		addBits(&rr.Counts, v.bits)
	}
	res.Notices = p.noticeResult(mark)
	var h, rh, hh Hist
	secs := map[int64]*Hist{}
	for i := range p.shards {
		sh := &p.shards[i]
		h.Merge(&sh.hist)
		rh.Merge(&sh.replay)
		hh.Merge(&sh.highHist)
		for s, st := range sh.perSec {
			res.PerSec[s] += st.deliveries
			if secs[s] == nil {
				secs[s] = &Hist{}
			}
			secs[s].Merge(&st.hist)
		}
	}
	rs := &p.rs
	res.Resume.Planned = int64(p.planned)
	res.Resume.Dropped, res.Resume.Skipped = rs.dropped.Load(), rs.skipped.Load()
	res.Resume.Breaks, res.Resume.Reconnects = rs.breaks.Load(), rs.reconnects.Load()
	res.Resume.ResumeDials, res.Resume.FreshDials = rs.resumeDials.Load(), rs.freshDials.Load()
	res.Resume.RecoveredTrue, res.Resume.RecoveredFalse = rs.recoveredTrue.Load(), rs.recoveredFalse.Load()
	res.Resume.RecoveredMissing, res.Resume.Failed = rs.recoveredMissing.Load(), rs.failed.Load()
	res.ResumeHist, res.RedialHist, res.CaughtUpHist = rs.resume.sparse(), rs.redial.sparse(), rs.caught.sparse()
	res.Hist, res.ReplayHist, res.HighHist = h.sparse(), rh.sparse(), hh.sparse()
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
	// Whole-time viewers of every tier and, per high-priority sequence,
	// how many of them got it (density.go).
	HighViewers int      `json:"highViewers,omitempty"`
	HighCounts  []uint32 `json:"highCounts,omitempty"`
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
	Again            uint64              `json:"replayedAgain"`
	History          uint64              `json:"history"`
	Resume           ResumeCounts        `json:"resume"`
	ResumeHist       sparse              `json:"resumeHist"`
	RedialHist       sparse              `json:"redialHist"`
	CaughtUpHist     sparse              `json:"caughtUpHist"`
	Foreign          uint64              `json:"foreign"`
	Misrouted        uint64              `json:"misrouted"`
	ExactDelivered   uint64              `json:"exactDelivered"`
	CountedDelivered uint64              `json:"countedDelivered"`
	Rooms            map[int]*RoomResult `json:"rooms"`
	PerSec           map[int64]uint64    `json:"perSec"`
	Hist             sparse              `json:"hist"`
	ReplayHist       sparse              `json:"replayHist"` // the messages of Hist that came in replay frames
	SecHist          map[int64]sparse    `json:"secHist"`
	Notices          *NoticeResult       `json:"notices,omitempty"`
	Tiers            map[int]*TierResult `json:"tiers,omitempty"`
	HighHist         sparse              `json:"highHist,omitempty"`
	CPUSeconds       float64             `json:"cpuSeconds"`
	RSSBytes         int64               `json:"rssBytes"`
	Inflated         uint64              `json:"inflated,omitempty"`
	InflateShared    uint64              `json:"inflateShared,omitempty"`
}

// ResumeCounts are the drops and resumes of the viewers.
type ResumeCounts struct {
	Planned          int64 `json:"planned"`          // drops drawn (-jitter, -churn)
	Dropped          int64 `json:"dropped"`          // carried out
	Skipped          int64 `json:"skipped"`          // due while the viewer was away or not connected
	Breaks           int64 `json:"breaks"`           // sessions the server or the network ended, then resumed (-reconnects)
	Reconnects       int64 `json:"reconnects"`       // successful re-dials
	ResumeDials      int64 `json:"resumeDials"`      // of which with since/epoch
	FreshDials       int64 `json:"freshDials"`       // of which fresh joins (a viewer that was never welcomed)
	RecoveredTrue    int64 `json:"recoveredTrue"`    // welcomes of resume dials saying recovered:true
	RecoveredFalse   int64 `json:"recoveredFalse"`   // ... recovered:false
	RecoveredMissing int64 `json:"recoveredMissing"` // ... without the field (the server ignored since)
	Failed           int64 `json:"failed"`           // viewers whose every re-dial failed
	AwayAtEnd        int64 `json:"awayAtEnd"`        // viewers still away when the run ended
}

func (r *ResumeCounts) add(o ResumeCounts) {
	r.Planned += o.Planned
	r.Dropped += o.Dropped
	r.Skipped += o.Skipped
	r.Breaks += o.Breaks
	r.Reconnects += o.Reconnects
	r.ResumeDials += o.ResumeDials
	r.FreshDials += o.FreshDials
	r.RecoveredTrue += o.RecoveredTrue
	r.RecoveredFalse += o.RecoveredFalse
	r.RecoveredMissing += o.RecoveredMissing
	r.Failed += o.Failed
	r.AwayAtEnd += o.AwayAtEnd
}

// wholeTime reports whether v was connected before the mark (unix nano)
// and is connected at the end, every session after a drop resumed.
func (v *viewer) wholeTime(mark int64) bool {
	return v.connected != 0 && v.connected < mark && v.conn != nil && !v.gone
}

// laneResult adds whole-time viewer v to its tier and its high-priority
// messages to rr.
func (res *PoolResult) laneResult(v *viewer, rr *RoomResult, full int) {
	if res.Tiers == nil {
		res.Tiers = map[int]*TierResult{}
	}
	v.tierResult(res.Tiers, full)
	rr.HighViewers++
	addBits(&rr.HighCounts, v.lane.hbits)
}

// addBits adds one to counts[seq] for every sequence set in a viewer's
// bitmap.
func addBits(counts *[]uint32, bitmap []uint64) {
	for w, word := range bitmap {
		for word != 0 {
			tz := bits.TrailingZeros64(word)
			seq := w*64 + tz
			for len(*counts) <= seq {
				*counts = append(*counts, 0)
			}
			(*counts)[seq]++
			word &^= 1 << uint(tz)
		}
	}
}
