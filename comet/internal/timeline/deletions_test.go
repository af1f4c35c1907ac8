package timeline

import (
	"slices"
	"strconv"
	"testing"

	"github.com/danmaku/danmaku"
)

// A deleted message leaves a hole in the ring: the positions around it do
// not move, a range over it is still covered, a tombstone read from the
// history advances the position without delivering anything, and the
// deleted id cannot come back through a stale read or a redelivery.
func TestTimelineRemove(t *testing.T) {
	tl := New(16, 0, 0)
	tl.SwitchEpoch("e")
	tl.Accept(posMsgs(1, 6))
	gen := tl.Gen // what caches of frames encoded from tl key on
	if n := tl.Remove([]string{"m3", "m5", "unknown"}); n != 2 {
		t.Fatalf("removed %d, want 2", n)
	}
	if tl.Gen == gen || tl.Last != 6 || !tl.Covers("e", 2) {
		t.Fatalf("after remove: gen %d (was %d), last %d, covers 2: %v", tl.Gen, gen, tl.Last, tl.Covers("e", 2))
	}
	if got := msgPositions(tl.After(2, 100)); !slices.Equal(got, []int64{4, 6}) {
		t.Fatalf("after 2: %v", got)
	}
	// From the history: a tombstone at 7, then 8; a stale copy of m3.
	out, _ := tl.Accept([]danmaku.Message{{ID: "m7", Pos: 7, Deleted: true}, {ID: "m8", Pos: 8}})
	if len(out) != 1 || out[0].ID != "m8" || tl.Last != 8 || !tl.Covers("e", 0) {
		t.Fatalf("tombstone: out %v, last %d, from %d", out, tl.Last, tl.From)
	}
	if out, _ := tl.Accept([]danmaku.Message{{ID: "m3", Pos: 9}}); len(out) != 0 || tl.Last != 9 {
		t.Fatalf("a deleted id came back: %v", out)
	}
	if got := tl.Visible([]danmaku.Message{{ID: "m2"}, {ID: "m3"}, {ID: "x", Deleted: true}, {ID: "m4"}}); len(got) != 2 {
		t.Fatalf("visible %v", got)
	}
	if got := msgPositions(tl.Recent(10)); !slices.Equal(got, []int64{1, 2, 4, 6, 8}) {
		t.Fatalf("recent %v", got)
	}
	// Old-epoch entries removed from the front keep old right.
	tl.SwitchEpoch("f")
	tl.Accept([]danmaku.Message{{ID: "n1", Pos: 1}})
	if tl.Remove([]string{"m1", "m2"}) != 2 || tl.old != 3 || tl.ring.n != 4 {
		t.Fatalf("old %d, entries %d", tl.old, tl.ring.n)
	}
	if got := msgPositions(tl.After(0, 10)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("after 0: %v", got)
	}
	for i := range goneMax + 1 {
		tl.Gone.Add("g"+strconv.Itoa(i), goneMax)
	}
	if len(tl.Gone.ids) != goneMax || tl.Gone.Has("m3") {
		t.Fatalf("gone holds %d ids", len(tl.Gone.ids))
	}
}
