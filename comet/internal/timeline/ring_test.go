package timeline

import (
	"strconv"
	"testing"

	"github.com/danmaku/danmaku"
)

func posMsgs(from, to int64) []danmaku.Message {
	var out []danmaku.Message
	for p := from; p <= to; p++ {
		out = append(out, danmaku.Message{ID: "m" + strconv.FormatInt(p, 10), Pos: p})
	}
	return out
}

func msgPositions(msgs []danmaku.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Pos
	}
	return out
}

// The ring keeps the newest messages of the epoch, says from which
// position it is complete, drops positions at or below the last and ids
// it holds, and takes older messages in front while it has room.
func TestTimelineRing(t *testing.T) {
	tl := New(16, 0, 0)
	tl.SwitchEpoch("e1")
	if out, dropped := tl.Accept(posMsgs(1, 10)); len(out) != 10 || dropped != 0 {
		t.Fatalf("accepted %d, dropped %d", len(out), dropped)
	}
	out, dropped := tl.Accept(posMsgs(8, 12)) // 8..10 again
	expectRange(t, msgPositions(out), 11, 12)
	if dropped != 3 || tl.Last != 12 || !tl.Covers("e1", 0) || tl.Covers("e2", 0) {
		t.Fatalf("dropped %d, last %d, covers %v", dropped, tl.Last, tl.Covers("e1", 0))
	}
	// A retry under a new position: the position advances, the id is not
	// delivered again.
	again := danmaku.Message{ID: "m5", Pos: 13}
	if out, _ := tl.Accept([]danmaku.Message{again}); len(out) != 0 || tl.Last != 13 {
		t.Fatalf("redelivered id: out %v, last %d", out, tl.Last)
	}
	tl.Accept(posMsgs(14, 30)) // wraps: 16 entries kept
	if tl.ring.n != 16 || tl.Covers("e1", tl.From-1) || !tl.Covers("e1", tl.From) {
		t.Fatalf("after wrap: %d entries, from %d", tl.ring.n, tl.From)
	}
	expectRange(t, msgPositions(tl.After(tl.From, 100)), tl.From+1, 30)
	expectRange(t, msgPositions(tl.Recent(5)), 26, 30)
	// A hole moves from up.
	tl.Accept(posMsgs(40, 41))
	if tl.From != 39 || tl.Covers("e1", 30) {
		t.Fatalf("after a hole from is %d", tl.From)
	}
	// Prepend fills in front while there is room.
	small := New(8, 0, 0)
	small.SwitchEpoch("e")
	small.Accept(posMsgs(20, 22))
	if small.From != 19 {
		t.Fatalf("from %d, want 19", small.From)
	}
	small.Prepend(posMsgs(10, 19), 9)
	if small.ring.n != 8 || small.From != 14 {
		t.Fatalf("after prepend: %d entries, from %d; want 8 and 14", small.ring.n, small.From)
	}
	expectRange(t, msgPositions(small.After(14, 100)), 15, 22)
	// A new epoch: the old entries only filter ids.
	small.SwitchEpoch("f")
	if out, _ := small.Accept([]danmaku.Message{{ID: "m21", Pos: 1}, {ID: "x", Pos: 2}}); len(out) != 1 || out[0].ID != "x" {
		t.Fatalf("new epoch accepted %v", out)
	}
	expectRange(t, msgPositions(small.After(0, 100)), 2, 2)
	expectRange(t, msgPositions(small.Recent(20)), 2, 2)
}

// With a span, the ring keeps the messages accepted within it of the
// newest (and at least keep of them), however large the ring may grow:
// a hot room keeps the last span of its timeline, a quiet one little.
func TestTimelineRingSpan(t *testing.T) {
	tl := New(1000, 0, 0)
	tl.span, tl.keep = 10_000, 5 // 10 s
	tl.SwitchEpoch("e")
	at := func(from, to, ts int64) []danmaku.Message {
		ms := posMsgs(from, to)
		for i := range ms {
			ms[i].TS = ts + int64(i)*1000 // one a second
		}
		return ms
	}
	tl.Accept(at(1, 30, 1_000)) // ts 1 s .. 30 s
	// The newest is at 30 s: what was accepted before 20 s is gone.
	expectRange(t, msgPositions(tl.After(0, 100)), 20, 30)
	if tl.From != 19 || !tl.Covers("e", 19) || tl.Covers("e", 18) {
		t.Fatalf("from %d after the span eviction, want 19", tl.From)
	}
	if _, ok := tl.ids["m19"]; ok {
		t.Fatal("an evicted id is still remembered")
	}
	// Long after, one new message: keep bounds the eviction.
	tl.Accept(at(31, 31, 1_000_000))
	expectRange(t, msgPositions(tl.After(0, 100)), 27, 31)
}

// expectRange checks that got is exactly from, from+1, ..., to.
func expectRange(tb testing.TB, got []int64, from, to int64) {
	tb.Helper()
	ok := int64(len(got)) == to-from+1
	for i := 0; ok && i < len(got); i++ {
		ok = got[i] == from+int64(i)
	}
	if !ok {
		tb.Fatalf("positions %v, want %d..%d", got, from, to)
	}
}
