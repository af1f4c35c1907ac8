package comet

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// timedFrames reads ws's msgs frames in the background with the time each
// arrived.
type timedFrames struct {
	mu     sync.Mutex
	frames []frame
	at     []time.Time
}

func readTimed(ws *wsviewer.Conn) *timedFrames {
	tf := &timedFrames{}
	go func() {
		for {
			f, _, err := ws.Next(time.Minute)
			if err != nil {
				return
			}
			if f.Msgs != nil {
				tf.mu.Lock()
				tf.frames, tf.at = append(tf.frames, flat(f)), append(tf.at, time.Now())
				tf.mu.Unlock()
			}
		}
	}()
	return tf
}

// got returns the frames so far as one account.
func (tf *timedFrames) got() got {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	var g got
	for _, f := range tf.frames {
		g.msgs = append(g.msgs, f.Msgs...)
		g.skipped += f.Skipped
		g.frames = append(g.frames, f)
	}
	return g
}

// arrival is when the message id reached the viewer (zero: never).
func (tf *timedFrames) arrival(id string) time.Time {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	for i, f := range tf.frames {
		for _, m := range f.Msgs {
			if m.ID == id {
				return tf.at[i]
			}
		}
	}
	return time.Time{}
}

// TestDensityFlush runs one room at 1,000 normal messages a second, pushed
// as job does (a batch every 100 ms), on a comet that holds capped tiers'
// frames for a second (density_flush 1s) and on one that sends every batch
// (0), and checks: the 10/s tier keeps the same messages and skipped
// counts on both, in about one frame a second instead of one a batch; the
// all tier gets every batch as it comes; a high-priority message and a
// viewer's own message reach capped viewers at once, with what their tier
// held, positions in order; the timer sends what is held after the last
// batch; a viewer that joins mid-interval and one that moves to the all
// tier mid-interval get each position once and exact skipped counts.
func TestDensityFlush(t *testing.T) {
	held, _ := mustStart(t, func(c *Config) { c.HistoryOnJoin = 0 })
	every, _ := mustStart(t, func(c *Config) { c.DensityFlush = 0 })
	room := testkit.Uniq("flush-")
	const n, size, highAt = 3000, 100, 1550
	feed := densityFeed{room: room, epoch: "e" + room, size: size}
	base := time.Now().UnixMilli()
	for i := range n {
		m := danmaku.Message{ID: fmt.Sprintf("%s-%06d", room, i), UID: int64(100 + i%50), Name: "n", Content: "c", TS: base + int64(i), Pos: int64(i + 1)}
		if i%500 == 321 {
			m.UID = ownUID
		}
		if i == highAt {
			m.Priority = danmaku.PriorityHigh
		}
		feed.msgs = append(feed.msgs, m)
	}
	capH := mustDial(t, held, "room="+room+"&density=10")
	allH := mustDial(t, held, "room="+room)
	own := mustDial(t, held, fmt.Sprintf("room=%s&density=10&uid=%d", room, ownUID))
	sw := mustDial(t, held, "room="+room+"&density=10")
	capE := mustDial(t, every, "room="+room+"&density=10")
	for _, ws := range []*wsviewer.Conn{capH, allH, own, sw, capE} {
		mustReadOp(t, ws, opWelcome)
	}
	rCapH, rAllH, rOwn, rCapE, rSw := readTimed(capH), readTimed(allH), readTimed(own), readTimed(capE), readTimed(sw)

	p := push.NewClient(testSecret, 5*time.Second)
	defer p.Close()
	pushed := map[string]time.Time{} // own and high messages: when their push was answered
	var rJoin *timedFrames
	var swAt, joinAt int64
	for k := range feed.batches() {
		b := feed.batch(k)
		mustPush(t, p, every, b)
		mustPush(t, p, held, b)
		for _, m := range b.Msgs {
			if m.UID == ownUID || m.Priority == danmaku.PriorityHigh {
				pushed[m.ID] = time.Now()
			}
		}
		switch k {
		case 12: // mid-interval: a viewer joins, another moves to the all tier
			swAt = b.Msgs[len(b.Msgs)-1].Pos
			mustSend(t, sw, map[string]any{"op": "density", "room": room, "max": 0})
			join := mustDial(t, held, "room="+room+"&density=10")
			joinAt = mustReadOp(t, join, opWelcome).Pos
			rJoin = readTimed(join)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // the timer sends what is held at the end

	gH, gE, gAll := rCapH.got(), rCapE.got(), rAllH.got()
	checkCounts(t, gE, feed)
	if !slices.Equal(gH.ids(), gE.ids()) || gH.skipped != gE.skipped {
		t.Fatalf("held frames: %d messages, %d skipped; sent with every batch: %d, %d", len(gH.msgs), gH.skipped, len(gE.msgs), gE.skipped)
	}
	checkAllTier(t, gAll, feed)
	if len(gAll.frames) != feed.batches() {
		t.Errorf("all tier: %d frames for %d batches", len(gAll.frames), feed.batches())
	}
	// 3 s of batches: a frame a second, one more for the high-priority
	// message, one for the start (the room's rate is not yet known).
	if len(gH.frames) > 6 || len(gE.frames) < 20 {
		t.Errorf("10/s tier: %d frames held, %d with every batch", len(gH.frames), len(gE.frames))
	}
	t.Logf("10/s tier: %d messages, %d skipped; %d frames held a second, %d sent with every batch; all tier %d frames",
		len(gH.msgs), gH.skipped, len(gH.frames), len(gE.frames), len(gAll.frames))

	for id, at := range pushed {
		rd := rCapH
		if feed.msgs[idIndex(feed, id)].Priority != danmaku.PriorityHigh {
			rd = rOwn
		}
		if got := rd.arrival(id); got.IsZero() || got.Sub(at) > 150*time.Millisecond {
			t.Errorf("%s reached the capped viewer %v after its push (zero: never); want at once", id, got.Sub(at))
		}
	}
	gOwn := rOwn.got()
	checkOrdered(t, "own", gOwn)
	checkCounts(t, gOwn, feed)
	checkOrdered(t, "capped", gH)
	checkSwitched(t, rSw.got(), gE, feed, swAt)
	checkJoined(t, rJoin.got(), feed, joinAt)
}

func idIndex(feed densityFeed, id string) int {
	return slices.IndexFunc(feed.msgs, func(m danmaku.Message) bool { return m.ID == id })
}

// checkOrdered fails when g holds a position twice or out of order.
func checkOrdered(t *testing.T, who string, g got) {
	t.Helper()
	for i := 1; i < len(g.msgs); i++ {
		if g.msgs[i].Pos <= g.msgs[i-1].Pos {
			t.Fatalf("%s viewer: position %d after %d", who, g.msgs[i].Pos, g.msgs[i-1].Pos)
		}
	}
}

// checkSwitched checks a viewer that moved from the 10/s tier to the all
// tier after position at: up to at it has the 10/s tier's messages (what
// the tier held for it when it moved included), after at every message,
// each once.
func checkSwitched(t *testing.T, g, tier got, feed densityFeed, at int64) {
	t.Helper()
	checkOrdered(t, "switched", g)
	var want []string
	for _, m := range tier.msgs {
		if m.Pos <= at {
			want = append(want, m.ID)
		}
	}
	for _, m := range feed.msgs[at:] {
		want = append(want, m.ID)
	}
	if !slices.Equal(g.ids(), want) {
		t.Fatalf("switched viewer: %d messages, want %d (the 10/s tier's up to position %d, every one after)", len(g.msgs), len(want), at)
	}
}

// checkJoined checks a capped viewer that joined at position at (no
// history on join): its messages and skipped counts account for every
// normal message after at once.
func checkJoined(t *testing.T, g got, feed densityFeed, at int64) {
	t.Helper()
	checkOrdered(t, "joined", g)
	var normal, want int64
	for _, m := range g.msgs {
		if m.Priority != danmaku.PriorityHigh {
			normal++
		}
	}
	for _, m := range feed.msgs[at:] {
		if m.Priority != danmaku.PriorityHigh {
			want++
		}
	}
	if normal+g.skipped != want {
		t.Fatalf("joined viewer: %d normal messages + %d skipped, want %d after position %d", normal, g.skipped, want, at)
	}
}

// checkCounts checks a capped viewer's account of the whole feed: every
// high-priority message, and normal messages plus skipped counts that
// add up to the feed's normal messages.
func checkCounts(t *testing.T, g got, feed densityFeed) {
	t.Helper()
	var high, normal, wantHigh int64
	for _, m := range g.msgs {
		if m.Priority == danmaku.PriorityHigh {
			high++
		} else {
			normal++
		}
	}
	for _, m := range feed.msgs {
		if m.Priority == danmaku.PriorityHigh {
			wantHigh++
		}
	}
	if high != wantHigh || normal+g.skipped != int64(len(feed.msgs))-wantHigh {
		t.Fatalf("capped viewer: %d high of %d, %d normal + %d skipped of %d", high, wantHigh, normal, g.skipped, int64(len(feed.msgs))-wantHigh)
	}
}
