package timeline

import (
	"fmt"
	"slices"
	"testing"

	"github.com/danmaku/danmaku"
)

// frame is a replay frame as the tests encode it: its range of positions
// and whether it was encoded to be shared.
type frame struct {
	first, last int64
	shared      bool
}

// recorder encodes frames and counts the encodings.
type recorder struct {
	calls []frame
	fail  bool // shared encodings fail
}

func (r *recorder) encode(msgs []danmaku.Message, shared bool) (frame, bool) {
	f := frame{msgs[0].Pos, msgs[len(msgs)-1].Pos, shared}
	r.calls = append(r.calls, f)
	if r.fail && shared {
		return frame{}, false
	}
	return f, true
}

func filled(n int64) *Timeline {
	tl := New(4096, 0, 0)
	tl.SwitchEpoch("e")
	tl.Accept(posMsgs(1, n))
	return &tl
}

// A replay is the head up to the next block boundary (for this viewer
// only), then whole blocks, then the partial tail; together they hold
// every position after since, once.
func TestReplaySpans(t *testing.T) {
	const B = ReplayBlock
	for _, tc := range []struct {
		since, last int64
		want        []frame
	}{
		{0, 10, []frame{{1, 10, false}}},
		{5, B, []frame{{6, B, false}}},
		{0, B + 3, []frame{{1, B, false}, {B + 1, B + 3, true}}},
		{10, 3*B + 7, []frame{{11, B, false}, {B + 1, 2 * B, true}, {2*B + 1, 3 * B, true}, {3*B + 1, 3*B + 7, true}}},
		{B, 2 * B, []frame{{B + 1, 2 * B, false}}},
		{B - 1, 2*B + 1, []frame{{B, B, false}, {B + 1, 2 * B, true}, {2*B + 1, 2*B + 1, true}}},
		{7, 7, nil},
	} {
		t.Run(fmt.Sprintf("%d-%d", tc.since, tc.last), func(t *testing.T) {
			var c Blocks[frame]
			var r recorder
			got := c.Replay(filled(tc.last), tc.since, r.encode, nil)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("replay (%d, %d]: %v, want %v", tc.since, tc.last, got, tc.want)
			}
		})
	}
}

// The shared blocks are encoded once for every viewer resuming through
// them; the head is encoded for each; a tail is encoded again once the
// head moved past it or its encoding failed.
func TestReplayBlocksShared(t *testing.T) {
	const B = ReplayBlock
	tl := filled(2*B + 5)
	var c Blocks[frame]
	var r recorder
	c.Replay(tl, 3, r.encode, nil)
	r.calls = nil
	got := c.Replay(tl, 9, r.encode, nil)
	if want := []frame{{10, B, false}}; !slices.Equal(r.calls, want) {
		t.Fatalf("second resume encoded %v, want only its head %v", r.calls, want)
	}
	if len(got) != 3 {
		t.Fatalf("second resume got %v", got)
	}
	tl.Accept(posMsgs(2*B+6, 2*B+8))
	r.calls = nil
	c.Replay(tl, 9, r.encode, nil)
	if want := []frame{{10, B, false}, {2*B + 1, 2*B + 8, true}}; !slices.Equal(r.calls, want) {
		t.Fatalf("after the head moved encoded %v, want %v", r.calls, want)
	}
	// A tail whose encoding failed is not sent, and is encoded again.
	r.fail = true
	tl.Accept(posMsgs(2*B+9, 2*B+9))
	got = c.Replay(tl, 0, r.encode, nil)
	if want := []frame{{1, B, false}, {B + 1, 2 * B, true}}; !slices.Equal(got, want) {
		t.Fatalf("with the tail failing got %v, want %v", got, want)
	}
	r.calls, r.fail = nil, false
	got = c.Replay(tl, 0, r.encode, nil)
	if want := []frame{{1, B, false}, {2*B + 1, 2*B + 9, true}}; len(got) != 3 || !slices.Equal(r.calls, want) {
		t.Fatalf("after a failed tail got %v, encoded %v", got, r.calls)
	}
}

// The cache drops its blocks once the timeline changed (Gen moved: a
// removal, a new epoch), and the blocks that left the ring.
func TestReplayCacheFollowsTimeline(t *testing.T) {
	const B = ReplayBlock
	tl := filled(2 * B)
	var c Blocks[frame]
	var r recorder
	c.Replay(tl, 0, r.encode, nil)
	r.calls = nil
	c.Replay(tl, 0, r.encode, nil)
	if len(r.calls) != 1 {
		t.Fatalf("the cache was dropped while the timeline did not change: %v", r.calls)
	}
	tl.Remove([]string{"m3"})
	r.calls = nil
	c.Replay(tl, 0, r.encode, nil)
	if len(r.calls) != 2 {
		t.Fatalf("after a removal encoded %v, want the block again", r.calls)
	}
	small := New(B+8, 0, 0)
	small.SwitchEpoch("e")
	small.Accept(posMsgs(1, 2*B))
	c = Blocks[frame]{}
	c.Replay(&small, small.From, r.encode, nil)
	small.Accept(posMsgs(2*B+1, 3*B)) // block (B, 2B] leaves the ring
	c.Replay(&small, small.From, r.encode, nil)
	for end := range c.whole {
		if end-B < small.From {
			t.Fatalf("block ending at %d kept with the ring from %d", end, small.From)
		}
	}
}
