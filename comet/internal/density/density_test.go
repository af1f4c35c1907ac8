package density

import (
	"testing"

	"github.com/danmaku/danmaku"
)

func TestSlot(t *testing.T) {
	tiers, err := NewTiers([]int{10, 30, 60})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ max, slot, cap int }{
		{0, 3, 0}, {-1, 3, 0}, {1, 0, 10}, {10, 0, 10}, {29, 0, 10}, {30, 1, 30}, {45, 1, 30}, {60, 2, 60}, {1000, 2, 60},
	} {
		if s := tiers.Slot(c.max); s != c.slot || tiers.Cap(s) != c.cap {
			t.Errorf("Slot(%d) = %d (cap %d), want %d (cap %d)", c.max, s, tiers.Cap(s), c.slot, c.cap)
		}
	}
	for _, bad := range [][]int{{30, 10}, {0}, {10, 10}, {1, 2, 3, 4, 5, 6, 7, 8}} {
		if _, err := NewTiers(bad); err == nil {
			t.Errorf("NewTiers(%v) accepted", bad)
		}
	}
	none, _ := NewTiers(nil)
	if none.Slot(10) != none.All() || none.Slots() != 1 {
		t.Error("without caps every request is the all tier")
	}
}

// A tier keeps its share of every stretch of positions, within a few
// messages, and the tiers' subsets are nested.
func TestThinShare(t *testing.T) {
	const rate = 2000
	msgs := make([]danmaku.Message, 20000)
	needs := make([]float64, len(msgs))
	for i := range msgs {
		msgs[i] = danmaku.Message{ID: "m", Pos: int64(i + 1)}
		if i%400 == 0 {
			msgs[i].Priority = danmaku.PriorityHigh
		}
		needs[i] = Need(&msgs[i], rate)
	}
	for _, cp := range []int{10, 30, 60} {
		for start := 0; start+rate <= len(msgs); start += rate / 4 {
			kept, skipped := Thin(nil, msgs[start:start+rate], needs[start:start+rate], cp)
			var normal int
			for _, m := range kept {
				if m.Priority != danmaku.PriorityHigh {
					normal++
				}
			}
			if normal < cp-2 || normal > cp+2 || int(skipped)+len(kept) != rate {
				t.Fatalf("cap %d, positions %d..: %d normal kept, %d skipped", cp, start+1, normal, skipped)
			}
		}
	}
	for i := range needs {
		if Keeps(needs[i], 10) && !Keeps(needs[i], 30) || msgs[i].Priority == danmaku.PriorityHigh && !Keeps(needs[i], 10) {
			t.Fatalf("position %d: kept by a lower tier only, or a high message left out", i+1)
		}
	}
}

// TestKeptGaps: the positions a capped tier keeps are never far apart, so
// a capped viewer hears of what was left out (the skipped count of its
// next frame) within a bounded run of positions: a cap of 10 in a room of
// 90 to 111 messages a second keeps positions at most 21 apart, under
// twice the rate over the cap.
func TestKeptGaps(t *testing.T) {
	for _, rate := range []float64{90, 100, 111} {
		last, widest := int64(0), int64(0)
		for p := int64(1); p <= 100000; p++ {
			if !Keeps(Need(&danmaku.Message{Pos: p}, rate), 10) {
				continue
			}
			if last > 0 && p-last > widest {
				widest = p - last
			}
			last = p
		}
		if bound := 2 * rate / 10; widest == 0 || float64(widest) > bound {
			t.Errorf("rate %.0f: kept positions up to %d apart, want at most %.1f", rate, widest, bound)
		}
	}
}
