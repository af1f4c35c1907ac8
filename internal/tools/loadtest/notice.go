package loadtest

import (
	"bytes"
	"context"
	"math/bits"
	"strconv"
	"sync"
	"time"

	"github.com/danmaku/danmaku/internal/auth"
)

// Notice runs (scenario U1): every viewer is a user of its own (viewer i
// connects with uid UserBase+i+1), and besides (or instead of) room
// messages the senders post notices through logic's admin API: pushes to
// users drawn at random among the viewers (POST /logic/push/user, one
// notice each) and broadcasts (POST /logic/broadcast). A notice's content
// is "lt:<seq>:<unixnano>" like a message's, seq counting per user, or
// over the broadcasts. Viewers account user and all frames apart from the
// rooms' msgs frames: one bitmap per viewer for its user's notices and
// one for the broadcasts, so a second copy is a duplicate and an accepted
// notice missing at a whole-time viewer is lost. Every viewer accounts
// notices exactly, whatever -exact-sample says.

var (
	opUserKey = []byte(`"op":"user"`)
	opAllKey  = []byte(`"op":"all"`)
)

// noticeBits is what one viewer received of notices.
type noticeBits struct {
	user, all       []uint64 // by user sequence, by broadcast sequence
	userDup, allDup uint64
}

// setBit sets bit seq of *b and reports whether it was clear.
func setBit(b *[]uint64, seq uint64) bool {
	w, bit := seq/64, uint64(1)<<(seq%64)
	for uint64(len(*b)) <= w {
		*b = append(*b, 0)
	}
	if (*b)[w]&bit != 0 {
		return false
	}
	(*b)[w] |= bit
	return true
}

// nextLT finds the next load-test content "lt:<seq>:<unixnano>" in b and
// returns its numbers and what follows it; without one, ok is false and
// rest is what is left after the last 'l'.
func nextLT(b []byte) (seq, ns uint64, rest []byte, ok bool) {
	for {
		// Find each "lt:" by its rare first byte rather than by the whole
		// `"content":"lt:` key, whose leading quote is in every JSON token.
		i := bytes.IndexByte(b, 'l')
		if i < 0 {
			return 0, 0, b, false
		}
		if i+3 > len(b) || b[i+1] != 't' || b[i+2] != ':' || i < len(anyContent) || !bytes.Equal(b[i-len(anyContent):i], anyContent) {
			b = b[i+1:]
			continue
		}
		b = b[i+3:]
		var ok bool
		if seq, b, ok = parseUint(b, ':'); !ok {
			continue
		}
		if ns, b, ok = parseUint(b, '"'); !ok {
			continue
		}
		return seq, ns, b, true
	}
}

// noticeFrame accounts b when it is a user or all frame.
func (p *Pool) noticeFrame(v *viewer, sh *shard, b []byte, now int64) {
	head := b[:min(len(b), 32)]
	all := bytes.Contains(head, opAllKey)
	if !all && !bytes.Contains(head, opUserKey) {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.sec(now / 1e9)
	for {
		seq, ns, rest, ok := nextLT(b)
		b = rest
		if !ok {
			return
		}
		bits, dups, h := &v.notices.user, &v.notices.userDup, &sh.userHist
		if all {
			bits, dups, h = &v.notices.all, &v.notices.allDup, &sh.allHist
		}
		if !setBit(bits, seq) {
			*dups++
			continue
		}
		lat := time.Duration(now - int64(ns))
		h.Add(lat)
		st.hist.Add(lat)
		st.deliveries++
		sh.total++
	}
}

// NoticeResult is what the whole-time viewers of one process received of
// notices.
type NoticeResult struct {
	// Users holds, per whole-time viewer (by index), the bitmap of its
	// user's notice sequences received.
	Users map[int][]uint64 `json:"users"`
	// AllViewers whole-time viewers; AllCounts per broadcast sequence how
	// many of them got it.
	AllViewers int      `json:"allViewers"`
	AllCounts  []uint32 `json:"allCounts,omitempty"`
	// Received by every viewer, duplicates included.
	UserReceived uint64 `json:"userReceived"`
	AllReceived  uint64 `json:"allReceived"`
	UserDups     uint64 `json:"userDups"`
	AllDups      uint64 `json:"allDups"`
	UserHist     sparse `json:"userHist"`
	AllHist      sparse `json:"allHist"`
}

// noticeResult collects the notices of the pool's viewers; the whole-time
// ones (see wholeTime) are accounted.
func (p *Pool) noticeResult(mark int64) *NoticeResult {
	if p.spec.UserBase == 0 {
		return nil
	}
	res := &NoticeResult{Users: map[int][]uint64{}}
	for _, v := range p.viewers {
		n := &v.notices
		res.UserDups += n.userDup
		res.AllDups += n.allDup
		res.UserReceived += popcount(n.user) + n.userDup
		res.AllReceived += popcount(n.all) + n.allDup
		if !v.wholeTime(mark) {
			continue
		}
		res.Users[v.idx] = n.user
		res.AllViewers++
		for w, word := range n.all {
			for word != 0 {
				seq := w*64 + bits.TrailingZeros64(word)
				for len(res.AllCounts) <= seq {
					res.AllCounts = append(res.AllCounts, 0)
				}
				res.AllCounts[seq]++
				word &= word - 1
			}
		}
	}
	var uh, ah Hist
	for i := range p.shards {
		uh.Merge(&p.shards[i].userHist)
		ah.Merge(&p.shards[i].allHist)
	}
	res.UserHist, res.AllHist = uh.sparse(), ah.sparse()
	return res
}

func popcount(b []uint64) uint64 {
	var n int
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return uint64(n)
}

// NoticeStats is the notice part of a report.
type NoticeStats struct {
	UserRate      float64   `json:"userRate"`
	BroadcastRate float64   `json:"broadcastRate"`
	UserSend      SendStats `json:"userSend"`
	BroadcastSend SendStats `json:"broadcastSend"`
	// Pairs of notice x whole-time viewer: a user notice is expected at
	// its user's viewer, a broadcast at every viewer.
	UserExpected   uint64 `json:"userExpected"`
	UserDelivered  uint64 `json:"userDelivered"`
	UserLost       uint64 `json:"userLost"`
	UserDuplicates uint64 `json:"userDuplicates"`
	// UserUnaccepted came although logic did not answer 202 (a timeout).
	UserUnaccepted uint64      `json:"userUnaccepted"`
	AllExpected    uint64      `json:"allExpected"`
	AllDelivered   uint64      `json:"allDelivered"`
	AllLost        uint64      `json:"allLost"`
	AllDuplicates  uint64      `json:"allDuplicates"`
	UserLatency    Percentiles `json:"userLatencyMs"`
	AllLatency     Percentiles `json:"broadcastLatencyMs"`
}

// noticeSenders post the notices of a run.
type noticeSenders struct {
	userRate, allRate float64
	user, all         *sender
}

// newNoticeSenders returns the senders of c's notices, nil without any.
func newNoticeSenders(c Config, userBase int64) *noticeSenders {
	if c.UserRate <= 0 && c.BroadcastRate <= 0 {
		return nil
	}
	ns := &noticeSenders{userRate: c.UserRate, allRate: c.BroadcastRate}
	spec := SendSpec{LogicURL: c.LogicURL, Timeout: c.Timeout, AdminSecret: c.AdminSecret, UserBase: userBase}
	if c.UserRate > 0 {
		us := spec
		us.Notice, us.Targets = "user", c.Viewers
		us.Senders = min(4096, max(64, int(c.UserRate/4)))
		ns.user = newSender(us)
	}
	if c.BroadcastRate > 0 {
		as := spec
		as.Notice, as.Targets, as.Senders = "all", 1, 4
		ns.all = newSender(as)
	}
	return ns
}

// start sends for d in the background; the function it returns waits
// until sending is over.
func (ns *noticeSenders) start(ctx context.Context, d time.Duration) (wait func()) {
	if ns == nil {
		return func() {}
	}
	var wg sync.WaitGroup
	for _, s := range []struct {
		snd  *sender
		rate float64
	}{{ns.user, ns.userRate}, {ns.all, ns.allRate}} {
		if s.snd == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.snd.openLoop(ctx, s.rate, d)
		}()
	}
	return wg.Wait
}

// accountNotices compares what the senders had accepted with what the
// viewers received, and adds the notices to the report's totals: its
// deliveries, losses and duplicates, and its latency when the run sent no
// room messages.
func (rep *Report) accountNotices(ns *noticeSenders, results []*PoolResult, d time.Duration) {
	if ns == nil {
		return
	}
	n := &NoticeStats{UserRate: ns.userRate, BroadcastRate: ns.allRate}
	var uh, ah Hist
	for _, r := range results {
		nr := r.Notices
		if nr == nil {
			continue
		}
		n.UserDuplicates += nr.UserDups
		n.AllDuplicates += nr.AllDups
		nr.UserHist.addTo(&uh)
		nr.AllHist.addTo(&ah)
		if ns.user != nil {
			ns.user.mu.Lock()
			for idx, got := range nr.Users {
				acc := ns.user.accepted[idx]
				for w := range max(len(acc), len(got)) {
					a, g := word(acc, w), word(got, w)
					n.UserExpected += uint64(bits.OnesCount64(a))
					n.UserDelivered += uint64(bits.OnesCount64(a & g))
					n.UserUnaccepted += uint64(bits.OnesCount64(g &^ a))
				}
			}
			ns.user.mu.Unlock()
		}
		if ns.all != nil {
			ns.all.mu.Lock()
			acc := ns.all.accepted[0]
			for seq := range len(acc) * 64 {
				if word(acc, seq/64)&(1<<(seq%64)) == 0 {
					continue
				}
				n.AllExpected += uint64(nr.AllViewers)
				if seq < len(nr.AllCounts) {
					n.AllDelivered += uint64(nr.AllCounts[seq])
				}
			}
			ns.all.mu.Unlock()
		}
	}
	n.UserLost, n.AllLost = n.UserExpected-n.UserDelivered, n.AllExpected-n.AllDelivered
	n.UserLatency, n.AllLatency = quantiles(&uh), quantiles(&ah)
	if ns.user != nil {
		n.UserSend = ns.user.stats(d)
	}
	if ns.all != nil {
		n.BroadcastSend = ns.all.stats(d)
	}
	rep.Notices = n
	rep.Delivered += n.UserDelivered + n.AllDelivered
	rep.Expected += n.UserExpected + n.AllExpected
	rep.Lost += n.UserLost + n.AllLost
	rep.Duplicates += n.UserDuplicates + n.AllDuplicates
	if rep.Latency.Count == 0 {
		uh.Merge(&ah)
		rep.Latency = quantiles(&uh)
	}
	if accepted := n.UserSend.Accepted + n.BroadcastSend.Accepted; rep.Redis != nil && rep.Send.Accepted == 0 && accepted > 0 {
		rep.Redis.PerMessage = float64(rep.Redis.Commands) / float64(accepted) // per notice
	}
}

func word(b []uint64, w int) uint64 {
	if w < len(b) {
		return b[w]
	}
	return 0
}

// noticeProblems are the reasons a notice run fails besides losses and
// duplicates (already in the report's totals).
func (rep *Report) noticeProblems() []string {
	n := rep.Notices
	if n == nil {
		return nil
	}
	var out []string
	if n.UserRate > 0 && n.UserSend.Accepted == 0 {
		out = append(out, "no user notice accepted")
	}
	if n.BroadcastRate > 0 && n.BroadcastSend.Accepted == 0 {
		out = append(out, "no broadcast accepted")
	}
	return out
}

// printNotices writes the notice part of the report.
func (rep *Report) printNotices(p func(string, ...any)) {
	n := rep.Notices
	if n == nil {
		return
	}
	for _, s := range []struct {
		what string
		st   SendStats
	}{{"user pushes", n.UserSend}, {"broadcasts", n.BroadcastSend}} {
		if s.st.Sent > 0 {
			p("  %s: sent %d accepted %d rejected %v errors %v (%.1f/s); POST p50 %.2f ms p99 %.2f ms; late sends %d",
				s.what, s.st.Sent, s.st.Accepted, s.st.Rejected, s.st.Errors, s.st.AcceptedPerS, s.st.PostP50Ms, s.st.PostP99Ms, s.st.LateSends)
		}
	}
	p("notices: user delivered %d / expected %d, LOST %d, DUPLICATES %d, unaccepted-but-delivered %d",
		n.UserDelivered, n.UserExpected, n.UserLost, n.UserDuplicates, n.UserUnaccepted)
	p("  broadcast delivered %d / expected %d, LOST %d, DUPLICATES %d", n.AllDelivered, n.AllExpected, n.AllLost, n.AllDuplicates)
	for _, l := range []struct {
		what string
		q    Percentiles
	}{{"user", n.UserLatency}, {"broadcast", n.AllLatency}} {
		p("  %s latency send->receipt ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  (%d samples)", l.what, l.q.P50, l.q.P90, l.q.P99, l.q.Max, l.q.Count)
	}
}

// noticeBody writes the head of a notice request for target k: a push to
// user UserBase+k+1, or a broadcast.
func (s *sender) noticeBody(buf *bytes.Buffer, k int) {
	if s.spec.Notice == "all" {
		buf.WriteString(`{"messages":[`)
		return
	}
	buf.WriteString(`{"userId":`)
	buf.WriteString(strconv.FormatInt(s.spec.UserBase+int64(k)+1, 10))
	buf.WriteString(`,"messages":[`)
}

// target is the room (or, for notices, the user index) of request i.
func (s *sender) target(i uint64) int {
	switch s.spec.Notice {
	case "user":
		return int(mix64(i) % uint64(s.spec.Targets))
	case "all":
		return 0
	}
	return s.spec.Layout.MessageRoom(i)
}

// userBaseFor returns a base for this run's user ids: users of another
// run on the same stack (another base) are never pushed to.
func userBaseFor(now time.Time) int64 {
	return (now.UnixNano()/int64(time.Millisecond)%1_000_000 + 1) * 1_000_000
}

// uidQuery is the uid parameter of viewer idx, with a token signed by
// secret that proves it; "" outside notice runs.
func uidQuery(base int64, secret string, idx int) string {
	if base == 0 {
		return ""
	}
	uid := base + int64(idx) + 1
	q := "&uid=" + strconv.FormatInt(uid, 10)
	if secret == "" {
		return q
	}
	tok, err := auth.Mint([]byte(secret), auth.Claims{UID: uid, ExpiresAt: time.Now().Add(24 * time.Hour)})
	if err != nil {
		return q
	}
	return q + "&token=" + tok
}
