package comet

import (
	"fmt"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
)

// A fresh join gets the room's last history_on_join messages with their
// positions in one replay frame right after a welcome that names the head;
// with history_on_join 0 it gets none.
func TestHistoryOnJoin(t *testing.T) {
	s, store := mustStart(t, nil)
	w := newTLRoom(t, store)
	w.write(30)
	ws, wel := joinWelcome(t, s, w.id, "")
	if wel.Epoch != w.head.Epoch || wel.Pos != 30 || wel.Recovered != nil {
		t.Fatalf("welcome %+v, want epoch %s pos 30 and no recovered", wel, w.head.Epoch)
	}
	f := mustReadOp(t, ws, "msgs")
	if !f.Replay || f.Epoch != w.head.Epoch {
		t.Fatalf("history frame replay %v epoch %q", f.Replay, f.Epoch)
	}
	expectRange(t, positions([]frame{f}), 11, 30)
	if f.Msgs[0].ID != w.id+"-11" || f.Msgs[0].Content != "m11" {
		t.Fatalf("first history message %+v", f.Msgs[0])
	}
	// A second viewer is served from the ring: the same frame.
	ws2, wel2 := joinWelcome(t, s, w.id, "")
	f2 := mustReadOp(t, ws2, "msgs")
	if wel2.Pos != 30 || len(f2.Msgs) != 20 || !f2.Replay {
		t.Fatalf("second viewer: welcome %+v, %d messages", wel2, len(f2.Msgs))
	}
	expectValue(t, s.metrics.replays.WithLabelValues("ring"), 1, "replays from the ring")

	off, _ := mustStart(t, func(c *Config) { c.HistoryOnJoin = 0 })
	ws3, wel3 := joinWelcome(t, off, w.id, "")
	if wel3.Pos != 30 || wel3.Epoch != w.head.Epoch {
		t.Fatalf("welcome without history %+v", wel3)
	}
	expectNoFrame(t, ws3, 300*time.Millisecond)

	// A room without a timeline: no history frame, pos 0.
	ws4, wel4 := joinWelcome(t, s, testkit.Uniq("empty"), "")
	if wel4.Pos != 0 || wel4.Epoch != "" {
		t.Fatalf("welcome of an empty room %+v", wel4)
	}
	expectNoFrame(t, ws4, 300*time.Millisecond)
}

// A viewer away for 3 s resumes with since and epoch: the welcome says
// recovered, the replay holds exactly the messages it missed, and live
// frames continue after them with no gap and no duplicate. The comet that
// held the room serves it from its ring; one that never held it reads
// Redis.
func TestResumeAfterDisconnect(t *testing.T) {
	s, store := mustStart(t, nil)
	other, _ := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws, _ := joinWelcome(t, s, w.id, "")
	mustPush(t, p, s, w.write(10))
	expectRange(t, positions(readMsgs(t, ws, 10)), 1, 10)
	ws.Close()
	for range 15 { // 3 s away while the room goes on
		mustPush(t, p, s, w.write(2))
		time.Sleep(200 * time.Millisecond)
	}
	resume := func(c *Server, since int64) {
		t.Helper()
		ws, wel := joinWelcome(t, c, w.id, resumeQuery(w.head.Epoch, since))
		last := w.head.Last
		if wel.Recovered == nil || !*wel.Recovered || wel.Pos != last || wel.Epoch != w.head.Epoch {
			t.Fatalf("welcome %+v, want recovered at pos %d", wel, last)
		}
		replay := readMsgs(t, ws, last)
		for _, f := range replay {
			if !f.Replay || f.Epoch != w.head.Epoch {
				t.Fatalf("replay frame: replay %v epoch %q", f.Replay, f.Epoch)
			}
		}
		expectRange(t, positions(replay), since+1, last)
		b := w.write(3)
		mustPush(t, p, s, b)
		mustPush(t, p, other, b)
		live := readMsgs(t, ws, w.head.Last)
		if live[0].Replay {
			t.Fatal("live frame marked replay")
		}
		expectRange(t, positions(live), last+1, w.head.Last)
	}
	resume(s, 10)
	if got := value(t, s.metrics.resumes.WithLabelValues("recovered")); got != 1 {
		t.Errorf("recovered resumes %v, want 1", got)
	}
	if got := value(t, s.metrics.replays.WithLabelValues("ring")); got != 1 {
		t.Errorf("replays from the ring %v, want 1", got)
	}
	resume(other, 12)
	if got := value(t, other.metrics.replays.WithLabelValues("redis")); got != 1 {
		t.Errorf("replays read from Redis on the other comet %v, want 1", got)
	}
}

// A resume naming another epoch, or a position older than the kept
// history, is answered recovered:false and the recent history.
func TestResumeUnrecoverable(t *testing.T) {
	s, store := mustStart(t, nil)
	w := newTLRoom(t, store)
	w.size = 50
	w.write(100) // positions 1..50 are trimmed
	for _, q := range []string{resumeQuery("not-the-epoch", 90), resumeQuery(w.head.Epoch, 10)} {
		ws, wel := joinWelcome(t, s, w.id, q)
		if wel.Recovered == nil || *wel.Recovered || wel.Pos != 100 {
			t.Fatalf("%s: welcome %+v, want recovered:false at pos 100", q, wel)
		}
		f := mustReadOp(t, ws, "msgs")
		if !f.Replay {
			t.Fatal("history frame without replay:true")
		}
		expectRange(t, positions([]frame{f}), 81, 100)
	}
	expectValue(t, s.metrics.resumes.WithLabelValues("unrecoverable"), 2, "unrecoverable resumes")
	// Within the kept history it is recovered, read from Redis.
	ws, wel := joinWelcome(t, s, w.id, resumeQuery(w.head.Epoch, 60))
	if wel.Recovered == nil || !*wel.Recovered {
		t.Fatalf("welcome %+v, want recovered", wel)
	}
	expectRange(t, positions(readMsgs(t, ws, 100)), 61, 100)
}

// A resume from a position beyond the room's head (in Redis too) names
// messages the room never had: it is answered recovered:false with the
// recent history, and the viewer gets the room's next messages, whether
// the comet held the room already or not.
func TestResumeBeyondHead(t *testing.T) {
	s, store := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	heldRoom, newRoom := newTLRoom(t, store), newTLRoom(t, store)
	heldRoom.write(3)
	newRoom.write(3)
	held, _ := joinWelcome(t, s, heldRoom.id, "")
	mustReadOp(t, held, "msgs")
	for _, tc := range []struct {
		w     *tlRoom
		since int64
	}{{heldRoom, 10}, {newRoom, 4}} {
		ws, wel := joinWelcome(t, s, tc.w.id, resumeQuery(tc.w.head.Epoch, tc.since))
		if wel.Recovered == nil || *wel.Recovered || wel.Pos != 3 {
			t.Fatalf("since %d: welcome %+v, want recovered:false at pos 3", tc.since, wel)
		}
		expectRange(t, positions([]frame{mustReadOp(t, ws, "msgs")}), 1, 3)
		if n := mustPush(t, p, s, tc.w.write(1)); n < 1 {
			t.Fatalf("push reached %d", n)
		}
		expectRange(t, positions(readMsgs(t, ws, 4)), 4, 4)
	}
	expectValue(t, s.metrics.resumes.WithLabelValues("unrecoverable"), 2, "unrecoverable resumes")
}

// A push whose first position is beyond the last one delivered has the
// missing range read from Redis and delivered first, in one frame.
func TestPushGapRepaired(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck = 0 })
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws, _ := joinWelcome(t, s, w.id, "")
	mustPush(t, p, s, w.write(5))
	expectRange(t, positions(readMsgs(t, ws, 5)), 1, 5)
	w.write(5) // 6..10: this push is lost
	mustPush(t, p, s, w.write(2))
	f := mustReadOp(t, ws, "msgs")
	expectRange(t, positions([]frame{f}), 6, 12)
	if f.Replay {
		t.Error("a repaired live frame is marked replay")
	}
	// A push already delivered (a stale retry) is dropped.
	old := w.write(1)
	mustPush(t, p, s, old)
	mustPush(t, p, s, old)
	expectRange(t, positions(readMsgs(t, ws, 13)), 13, 13)
	expectNoFrame(t, ws, 200*time.Millisecond)
	if got := value(t, s.metrics.gapRepairs.WithLabelValues(repairPushGap)); got != 1 {
		t.Errorf("push gap repairs %v, want 1", got)
	}
	if got := value(t, s.metrics.repairedMsgs.WithLabelValues(repairPushGap)); got != 5 {
		t.Errorf("repaired messages %v, want 5", got)
	}
}

// When the room's history is lost and a new epoch starts, the first push
// of the new epoch the comet sees has the epoch read from its start.
func TestNewEpochRepairedFromStart(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck = 0 })
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws, _ := joinWelcome(t, s, w.id, "")
	oldBatch := w.write(5)
	mustPush(t, p, s, oldBatch)
	readMsgs(t, ws, 5)
	first := w.head.Epoch
	w.wipe()
	w.write(3) // 1..3 of the new epoch: pushes lost
	mustPush(t, p, s, w.write(2))
	if w.head.Epoch == first {
		t.Fatal("no new epoch")
	}
	f := mustReadOp(t, ws, "msgs")
	if f.Epoch != w.head.Epoch {
		t.Fatalf("frame epoch %q, want %q", f.Epoch, w.head.Epoch)
	}
	expectRange(t, positions([]frame{f}), 1, 5)
	// A push of the ended epoch arriving late is dropped.
	if n := mustPush(t, p, s, oldBatch); n != 0 {
		t.Errorf("stale push delivered to %d viewers", n)
	}
	expectNoFrame(t, ws, 200*time.Millisecond)
	if got := value(t, s.metrics.staleMsgs); got != 5 {
		t.Errorf("stale messages %v, want 5", got)
	}
}

// The gap check repairs a room whose last pushes were lost, with no later
// push to reveal the gap.
func TestGapCheckRepairsLostPush(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck = 100 * time.Millisecond })
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws, _ := joinWelcome(t, s, w.id, "")
	mustPush(t, p, s, w.write(3))
	readMsgs(t, ws, 3)
	w.write(4) // lost
	start := time.Now()
	expectRange(t, positions(readMsgs(t, ws, 7)), 4, 7)
	if d := time.Since(start); d > time.Second {
		t.Errorf("repaired after %v", d)
	}
	// Counted once the repair's frame is handed out, so perhaps just after
	// the viewer read it.
	testkit.SucceedsSoon(t, time.Second, func() error {
		if got := value(t, s.metrics.gapRepairs.WithLabelValues(repairCheck)); got != 1 {
			return fmt.Errorf("check repairs %v, want 1", got)
		}
		return nil
	})
}

// A viewer that joined a room before it had a timeline (welcome epoch "",
// pos 0) resumes with since=0 and no epoch, and gets the current epoch from
// its start: everything is new to it.
func TestResumeFromBeforeTheTimeline(t *testing.T) {
	s, store := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws, wel := joinWelcome(t, s, w.id, "")
	if wel.Epoch != "" || wel.Pos != 0 {
		t.Fatalf("welcome of a room without a timeline: %+v", wel)
	}
	ws.Close()
	mustPush(t, p, s, w.write(5))
	ws, wel = joinWelcome(t, s, w.id, resumeQuery("", 0))
	if wel.Recovered == nil || !*wel.Recovered || wel.Epoch != w.head.Epoch || wel.Pos != 5 {
		t.Fatalf("welcome %+v, want recovered in epoch %q at pos 5", wel, w.head.Epoch)
	}
	expectRange(t, positions(readMsgs(t, ws, 5)), 1, 5)
}
