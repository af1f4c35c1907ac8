package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku/internal/testkit"
)

func TestFrameEpochAndPos(t *testing.T) {
	msg := func(seq, pos int) string {
		return fmt.Sprintf(`{"id":"m%d","uid":1,"name":"lt","content":"lt:%d:1","ts":1,"pos":%d}`, seq, seq, pos)
	}
	var many []string
	for i := 1; i <= 40; i++ {
		many = append(many, msg(i, 100+i))
	}
	for _, c := range []struct {
		name, frame string
		epoch       string // "" : none
		pos         int64  // 0: none
		replay      bool
	}{
		{"epoch after msgs", `{"op":"msgs","room":"a","msgs":[` + msg(1, 7) + `,` + msg(2, 8) + `],"epoch":"e-1","replay":true}`, "e-1", 8, true},
		{"epoch before msgs", `{"op":"msgs","room":"a","epoch":"xyz","msgs":[` + msg(1, 12) + `]}`, "xyz", 12, false},
		{"long frame, epoch at the end", `{"op":"msgs","room":"a","msgs":[` + strings.Join(many, ",") + `],"epoch":"E9"}`, "E9", 140, false},
		{"long frame, epoch first", `{"op":"msgs","room":"a","epoch":"E9","replay":true,"msgs":[` + strings.Join(many, ",") + `]}`, "E9", 140, true},
		{"no timeline fields", `{"op":"msgs","room":"a","msgs":[{"id":"m","uid":1,"name":"lt","content":"lt:1:1","ts":1}]}`, "", 0, false},
		{"content that looks like a key", `{"op":"msgs","room":"a","msgs":[{"id":"m","uid":1,"name":"lt","content":"\"pos\":9 \"epoch\":\"no\"","ts":1}]}`, "", 0, false},
	} {
		b := []byte(c.frame)
		ep, ok := frameEpoch(b)
		if ok != (c.epoch != "") || string(ep) != c.epoch {
			t.Errorf("%s: epoch %q %v, want %q", c.name, ep, ok, c.epoch)
		}
		pos, ok := lastPos(b)
		if ok != (c.pos != 0) || pos != c.pos {
			t.Errorf("%s: pos %d %v, want %d", c.name, pos, ok, c.pos)
		}
		if got := isReplay(b); got != c.replay {
			t.Errorf("%s: replay %v, want %v", c.name, got, c.replay)
		}
	}

	// A viewer keeps the highest position of its epoch and starts over on
	// a new one.
	v := &viewer{}
	v.track([]byte(`{"op":"msgs","room":"a","msgs":[` + msg(1, 5) + `],"epoch":"e1"}`))
	v.track([]byte(`{"op":"msgs","room":"a","msgs":[` + msg(2, 6) + `],"epoch":"e1"}`))
	if v.epoch != "e1" || v.pos != 6 {
		t.Fatalf("after e1: epoch %q pos %d", v.epoch, v.pos)
	}
	v.track([]byte(`{"op":"msgs","room":"a","msgs":[` + msg(3, 2) + `],"epoch":"e2"}`))
	if v.epoch != "e2" || v.pos != 2 {
		t.Fatalf("after e2: epoch %q pos %d", v.epoch, v.pos)
	}
}

func TestResumeQuery(t *testing.T) {
	if got := resumeQuery("lt-room-0", "", 0, false); got != "room=lt-room-0" {
		t.Errorf("fresh: %s", got)
	}
	if got := resumeQuery("lt-room-0", "ab+c", 0, true); got != "room=lt-room-0&since=0&epoch=ab%2Bc" {
		t.Errorf("resume from 0: %s", got)
	}
	if got := resumeQuery("r", "e1", 12345, true); got != "room=r&since=12345&epoch=e1" {
		t.Errorf("resume: %s", got)
	}
	if got := resumeQuery("r", "", 0, true); got != "room=r&since=0&epoch=" {
		t.Errorf("resume of a room that had no timeline at the welcome: %s", got)
	}
}

func TestWelcome(t *testing.T) {
	w, ok := parseWelcome([]byte(`{"op":"welcome","connId":"c1","room":"a","online":3,"heartbeatMs":30000,"epoch":"e1","pos":42,"recovered":true}`))
	if !ok || w.Epoch != "e1" || w.Pos != 42 || w.Recovered == nil || !*w.Recovered {
		t.Fatalf("welcome %+v %v", w, ok)
	}
	if _, ok := parseWelcome([]byte(`{"op":"msgs","room":"a","msgs":[]}`)); ok {
		t.Fatal("a msgs frame taken for a welcome")
	}
	p := NewPool(PoolSpec{Rooms: []string{"a"}, RoomViewers: []int{1}, To: 1})
	v := p.viewers[0]
	p.welcomed(v, welcome{Op: "welcome", Epoch: "e1", Pos: 40}, false)
	if v.epoch != "e1" || v.pos != 40 || v.replay != replaySkip {
		t.Fatalf("first join: %q %d %d", v.epoch, v.pos, v.replay)
	}
	v.pos = 50
	yes, no := true, false
	p.welcomed(v, welcome{Op: "welcome", Epoch: "e1", Pos: 60, Recovered: &yes}, true)
	if v.pos != 50 || v.replay != replayNone || p.rs.recoveredTrue.Load() != 1 {
		t.Fatalf("recovered: pos %d replay %d", v.pos, v.replay)
	}
	p.welcomed(v, welcome{Op: "welcome", Epoch: "e2", Pos: 3, Recovered: &no}, true)
	if v.epoch != "e2" || v.pos != 3 || v.replay != replayLenient || p.rs.recoveredFalse.Load() != 1 {
		t.Fatalf("not recovered: %q %d %d", v.epoch, v.pos, v.replay)
	}
	p.welcomed(v, welcome{Op: "welcome"}, true)
	if p.rs.recoveredMissing.Load() != 1 || v.epoch != "e2" {
		t.Fatalf("welcome without recovered: %d %q", p.rs.recoveredMissing.Load(), v.epoch)
	}
}

// timelineServer is a one-room WebSocket server speaking the resume side
// of the wire contract, so the viewers' resume path can be checked before
// any comet implements it: positions, epoch, history on join and, when
// honour is set, recovery of everything after since. Joins and broadcasts
// hold one lock, so the seam between replay and live frames is exact.
type timelineServer struct {
	honour bool

	mu    sync.Mutex
	seqs  []int // the timeline: pos i+1 carries content lt:seqs[i]
	conns map[*websocket.Conn]bool
}

func (s *timelineServer) frame(from, to int, replay bool) []byte {
	var b strings.Builder
	b.WriteString(`{"op":"msgs","room":"a","msgs":[`)
	for i := from; i < to; i++ {
		if i > from {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"m%d","uid":1,"name":"lt","content":"lt:%d:%d","ts":1,"pos":%d}`, i, s.seqs[i], time.Now().UnixNano(), i+1)
	}
	b.WriteString(`],"epoch":"e1"`)
	if replay {
		b.WriteString(`,"replay":true`)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func (s *timelineServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	from, rec := max(0, len(s.seqs)-tlHistory), ""
	if q.Has("since") {
		since, _ := strconv.Atoi(q.Get("since"))
		ok := s.honour && q.Get("epoch") == "e1" && since <= len(s.seqs)
		rec = fmt.Sprintf(`,"recovered":%v`, ok)
		if ok {
			from = since
		}
	}
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"op":"welcome","connId":"c","room":"a","online":1,"heartbeatMs":30000,"epoch":"e1","pos":%d%s}`, len(s.seqs), rec))
	if from < len(s.seqs) {
		c.WriteMessage(websocket.TextMessage, s.frame(from, len(s.seqs), true))
	}
	s.conns[c] = true
}

// send appends seq to the timeline and writes it to every viewer.
func (s *timelineServer) send(seq int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs = append(s.seqs, seq)
	f := s.frame(len(s.seqs)-1, len(s.seqs), false)
	for c := range s.conns {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		if c.WriteMessage(websocket.TextMessage, f) != nil {
			c.Close()
			delete(s.conns, c)
		}
	}
}

func (s *timelineServer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// cut closes every viewer's connection with code, as a comet cutting a
// slow consumer does.
func (s *timelineServer) cut(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, "cut"), time.Now().Add(time.Second))
		c.Close()
		delete(s.conns, c)
	}
}

const (
	tlViewers = 20
	tlMsgs    = 100
	tlHistory = 5 // messages replayed on a join without recovery
)

// runTimeline connects tlViewers viewers of spec to a timelineServer that
// already holds five messages (sequences 1000-1004, from before the run),
// marks, sends tlMsgs messages 10 ms apart (calling during before each),
// waits until no viewer is away (and, with wantAll, until every viewer has
// every message) and finishes. It returns the pool's result and how many
// viewer x message pairs the whole-time viewers miss.
func runTimeline(t *testing.T, honour bool, spec PoolSpec, wantAll bool, during func(seq int, s *timelineServer)) (*PoolResult, int) {
	t.Helper()
	s := &timelineServer{honour: honour, conns: map[*websocket.Conn]bool{}}
	for k := 0; k < 5; k++ {
		s.seqs = append(s.seqs, 1000+k)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer s.close()
	spec.Targets, spec.Rooms, spec.RoomViewers, spec.To = []string{strings.TrimPrefix(srv.URL, "http://")}, []string{"a"}, []int{tlViewers}, tlViewers
	spec.Rate, spec.SendFor, spec.Seed, spec.DialTimeout = 1000, time.Second, 7, 5*time.Second
	p := NewPool(spec)
	go p.Open(context.Background())
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if pr := p.Progress(); !pr.Done || pr.Connected != tlViewers {
			return fmt.Errorf("progress %+v", pr)
		}
		return nil
	})
	p.Mark()
	for seq := 0; seq < tlMsgs; seq++ {
		if during != nil {
			during(seq, s)
		}
		s.send(seq)
		time.Sleep(10 * time.Millisecond)
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		pr := p.Progress()
		if pr.Away != 0 || (wantAll && pr.Delivered < tlViewers*tlMsgs) {
			return fmt.Errorf("progress %+v", pr)
		}
		return nil
	})
	time.Sleep(100 * time.Millisecond)
	res := p.Finish()
	if res.History != 5*tlViewers {
		t.Errorf("history %d, want %d", res.History, 5*tlViewers)
	}
	missing := 0
	if rr := res.Rooms[0]; rr != nil {
		if wantAll && len(rr.Counts) > tlMsgs {
			t.Errorf("history was accounted: counts up to sequence %d", len(rr.Counts)-1)
		}
		for seq := 0; seq < tlMsgs; seq++ {
			got := 0
			if seq < len(rr.Counts) {
				got = int(rr.Counts[seq])
			}
			missing += rr.Exact - got
		}
	}
	return res, missing
}

// TestJitterResume drops every viewer once for about 400 ms while the
// messages flow. Against a server that recovers, each viewer ends with
// every message exactly once and every resume welcome says recovered:true;
// against one that does not, the same run shows the gaps (beyond the few
// messages of history it replays) as missing deliveries.
func TestJitterResume(t *testing.T) {
	for _, honour := range []bool{true, false} {
		t.Run(fmt.Sprintf("recovers=%v", honour), func(t *testing.T) {
			res, missing := runTimeline(t, honour, PoolSpec{Jitter: 400 * time.Millisecond}, honour, nil)
			r := res.Resume
			if r.Planned != tlViewers || r.Dropped != tlViewers || r.Reconnects != tlViewers || r.ResumeDials != tlViewers || r.Failed != 0 {
				t.Fatalf("resume counts %+v", r)
			}
			if rr := res.Rooms[0]; rr == nil || rr.Exact != tlViewers {
				t.Fatalf("whole-time viewers: %+v", rr)
			}
			if res.Dups != 0 {
				t.Errorf("%d duplicates", res.Dups)
			}
			if honour {
				if missing != 0 || r.RecoveredTrue != tlViewers {
					t.Errorf("recovering server: missing %d, resume %+v", missing, r)
				}
				return
			}
			if missing < tlViewers || r.RecoveredFalse != tlViewers {
				t.Errorf("server without recovery: missing %d, resume %+v", missing, r)
			}
		})
	}
}

// TestCutResume: the server cuts every viewer (4008) halfway. With
// -reconnects they come back, resume and stay whole-time viewers with
// nothing missing; without, they are closed and not accounted.
func TestCutResume(t *testing.T) {
	cut := func(seq int, s *timelineServer) {
		if seq == tlMsgs/2 {
			s.cut(4008)
		}
	}
	res, missing := runTimeline(t, true, PoolSpec{Reconnects: 1}, true, cut)
	r := res.Resume
	if r.Breaks != tlViewers || r.Reconnects != tlViewers || r.RecoveredTrue != tlViewers || missing != 0 || res.Dups != 0 {
		t.Errorf("with reconnects: resume %+v, missing %d, dups %d", r, missing, res.Dups)
	}
	if rr := res.Rooms[0]; rr == nil || rr.Exact != tlViewers || res.Closes["close 4008"] != tlViewers {
		t.Errorf("with reconnects: whole-time %+v, closes %v", rr, res.Closes)
	}

	res, _ = runTimeline(t, true, PoolSpec{}, false, cut)
	if res.Resume.Reconnects != 0 || res.Rooms[0] != nil || res.Partial != tlViewers || res.Closed != tlViewers {
		t.Errorf("without reconnects: resume %+v, rooms %v, partial %d, closed %d", res.Resume, res.Rooms, res.Partial, res.Closed)
	}
}
