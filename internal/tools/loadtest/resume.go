package loadtest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
)

// Viewers resume like the browser client: each keeps its room's epoch and
// the last position it received, and every reconnect asks the comet for
// what it missed with GET /ws?room=R&since=P&epoch=E. A viewer's account
// (its bitmap of received sequences) lives in its struct for the whole run,
// so its sessions count as one viewer: a resumed viewer must end with every
// accepted message of its room exactly once, like one that never left.

var (
	epochKey   = []byte(`"epoch":"`)
	posKey     = []byte(`"pos":`)
	replayTrue = []byte(`"replay":true`)
)

// scanWindow bounds the frame-level scans: the frame's own fields (epoch,
// replay) sit before or after its messages, and the last message's pos is
// near the end, so only the first and last scanWindow bytes are searched.
const scanWindow = 512

// findKey reports the index just past key in b's tail or head, or -1.
// The tail is searched first (backwards, from the end), the head then.
func findKey(b, key []byte) int {
	off := max(0, len(b)-scanWindow)
	if i := lastKey(b[off:], key); i >= 0 {
		return off + i + len(key)
	}
	if off == 0 {
		return -1
	}
	if i := bytes.Index(b[:scanWindow], key); i >= 0 {
		return i + len(key)
	}
	return -1
}

// lastKey returns the index of the last key in b, scanning backwards from
// the end: a key near the end is found after a few bytes, and the loop
// compares one byte per position (key[1], a letter, is rarer in JSON than
// the quote key[0]).
func lastKey(b, key []byte) int {
	for i := len(b) - len(key); i >= 0; i-- {
		if b[i+1] == key[1] && b[i] == key[0] && bytes.Equal(b[i:i+len(key)], key) {
			return i
		}
	}
	return -1
}

// frameEpoch returns the frame's "epoch" value (not copied).
func frameEpoch(b []byte) ([]byte, bool) {
	i := findKey(b, epochKey)
	if i < 0 {
		return nil, false
	}
	j := bytes.IndexByte(b[i:], '"')
	if j < 0 {
		return nil, false
	}
	return b[i : i+j], true
}

// lastPos returns the "pos" of the frame's last message.
func lastPos(b []byte) (int64, bool) {
	off := max(0, len(b)-scanWindow)
	i := lastKey(b[off:], posKey)
	if i < 0 {
		return 0, false
	}
	var x int64
	n := 0
	for _, c := range b[off+i+len(posKey):] {
		if c < '0' || c > '9' || n > 18 {
			break
		}
		x = x*10 + int64(c-'0')
		n++
	}
	return x, n > 0
}

// isReplay reports whether the frame replays stored messages.
func isReplay(b []byte) bool { return findKey(b, replayTrue) >= 0 }

// resumeQuery is the query of a viewer's dial: a fresh join before its
// first welcome, a resume from its last position after it (with an empty
// epoch and position 0 when the room had no timeline yet: the comet then
// replays the current epoch from its start).
func resumeQuery(room, epoch string, pos int64, joined bool) string {
	q := "room=" + url.QueryEscape(room)
	if !joined {
		return q
	}
	return q + "&since=" + strconv.FormatInt(pos, 10) + "&epoch=" + url.QueryEscape(epoch)
}

// welcome is the welcome frame (once per connection, so decoded as JSON).
type welcome = danmaku.Welcome

func parseWelcome(b []byte) (welcome, bool) {
	var w welcome
	if json.Unmarshal(b, &w) != nil || w.Op != danmaku.OpWelcome {
		return w, false
	}
	return w, true
}

// Replay handling of the frames right after a welcome, until the first
// frame that is not a replay.
const (
	replayNone    = iota
	replaySkip    // first join: replayed history predates the run, not accounted
	replayLenient // rejoin without recovery: a second copy is the history overlapping, not a duplicate
)

// welcomed applies a session's welcome to the viewer: resumed says whether
// the dial asked to resume.
func (p *Pool) welcomed(v *viewer, w welcome, resumed bool) {
	first := v.sessions == 0
	v.sessions++
	switch {
	case first:
		v.replay = replaySkip
	case resumed && w.Recovered != nil && *w.Recovered:
		p.rs.recoveredTrue.Add(1)
		v.replay = replayNone
		return // keep the viewer's own position: the replay follows
	case resumed && w.Recovered != nil:
		p.rs.recoveredFalse.Add(1)
		v.replay = replayLenient
	case resumed:
		p.rs.recoveredMissing.Add(1)
		v.replay = replayLenient
	default:
		v.replay = replayLenient
	}
	if w.Epoch != "" {
		v.epoch, v.pos = w.Epoch, w.Pos
	}
}

// track keeps the viewer's epoch and last position from a msgs frame.
func (v *viewer) track(b []byte) {
	if ep, ok := frameEpoch(b); ok && string(ep) != v.epoch {
		v.epoch, v.pos = string(ep), 0
	}
	if pos, ok := lastPos(b); ok && pos > v.pos {
		v.pos = pos
	}
}

// drop is one planned disconnection, relative to Mark.
type drop struct {
	at   time.Duration
	away time.Duration
	v    *viewer
}

// plan draws the drops of every viewer: with Jitter each drops once at a
// random moment of the sending period and stays away about Jitter (±10 %);
// with Churn a share of the viewers drop ChurnDrops times, each time away
// up to ChurnAway. A drop is placed so its absence ends within the sending
// period when the period is long enough. The draw depends only on Seed and
// the viewer's index.
func (p *Pool) plan() []drop {
	s := p.spec
	var out []drop
	place := func(r *rand.Rand, v *viewer, away time.Duration) {
		span := s.SendFor
		if span > away {
			span -= away
		}
		out = append(out, drop{at: time.Duration(r.Float64() * float64(span)), away: away, v: v})
	}
	for _, v := range p.viewers {
		r := rand.New(rand.NewPCG(s.Seed, uint64(v.idx)))
		if s.Jitter > 0 {
			place(r, v, time.Duration(float64(s.Jitter)*(0.9+0.2*r.Float64())))
		}
		if s.Churn > 0 && r.Float64() < s.Churn {
			for k := 0; k < max(1, s.ChurnDrops); k++ {
				place(r, v, max(time.Millisecond, time.Duration(r.Float64()*float64(s.ChurnAway))))
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].at < out[b].at })
	return out
}

// schedule carries out the drops from the mark until Finish.
func (p *Pool) schedule(start time.Time, drops []drop) {
	defer p.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for _, d := range drops {
		if w := time.Until(start.Add(d.at)); w > 0 {
			t.Reset(w)
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
		if p.cut(d.v, d.away) {
			p.rs.dropped.Add(1)
		} else {
			p.rs.skipped.Add(1)
		}
	}
}

// cut closes the viewer's socket abruptly (an RST, as when a network path
// breaks); its reader then stays away for away and resumes. A viewer that is
// away already keeps its current absence.
func (p *Pool) cut(v *viewer, away time.Duration) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.conn == nil || v.dropAway > 0 || p.stopping.Load() {
		return false
	}
	v.dropAway = away
	abort(v.conn)
	return true
}

func abort(c frameConn) {
	if tc, ok := tcpOf(c.NetConn()); ok {
		tc.SetLinger(0)
	}
	c.NetConn().Close()
}

// redialAttempts bounds the dials of one resume; between them the viewer
// waits redialBackoff, doubled each time.
const (
	redialAttempts = 4
	redialBackoff  = 250 * time.Millisecond
)

// resume keeps the viewer away for away, then dials it back with its
// position. It returns false when the viewer is done: Finish came, or every
// attempt failed.
func (p *Pool) resume(v *viewer, away time.Duration, dropped time.Time) bool {
	p.away.Add(1)
	defer p.away.Add(-1)
	if !p.sleep(away) {
		v.awayAtEnd = true
		return false
	}
	var err error
	for attempt := 0; attempt < redialAttempts; attempt++ {
		if attempt > 0 && !p.sleep(redialBackoff<<(attempt-1)) {
			v.awayAtEnd = true
			return false
		}
		resumed := v.sessions > 0
		start := time.Now()
		var c frameConn
		var w welcome
		c, w, err = p.dial(p.ctx, v)
		if err != nil {
			if p.stopping.Load() {
				v.awayAtEnd = true
				return false
			}
			v.target = (v.target + 1) % len(p.spec.Targets)
			continue
		}
		if !p.install(v, c) {
			v.awayAtEnd = true
			return false
		}
		now := time.Now()
		p.rs.reconnects.Add(1)
		if resumed {
			p.rs.resumeDials.Add(1)
		} else {
			p.rs.freshDials.Add(1)
		}
		p.welcomed(v, w, resumed)
		v.behind = dropped.UnixNano()
		p.rs.mu.Lock()
		p.rs.resume.Add(now.Sub(dropped))
		p.rs.redial.Add(now.Sub(start))
		p.rs.mu.Unlock()
		return true
	}
	v.gone = true
	v.closed = time.Now().UnixNano()
	p.rs.failed.Add(1)
	p.mu.Lock()
	p.failures["resume: "+err.Error()]++
	p.mu.Unlock()
	return false
}

// install makes c the viewer's connection unless Finish has begun.
func (p *Pool) install(v *viewer, c frameConn) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if p.stopping.Load() {
		abort(c)
		return false
	}
	v.conn = c
	return true
}

// sleep waits d; false when Finish came first.
func (p *Pool) sleep(d time.Duration) bool {
	if d <= 0 {
		return !p.stopping.Load()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.stop:
		return false
	case <-t.C:
		return true
	}
}
