package comet

import (
	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/density"
	"github.com/danmaku/danmaku/comet/internal/timeline"
)

// replayItem returns a msgs frame with replay:true for msgs, encoded now
// when shared, else by the viewer's writer.
func (r *room) replayItem(msgs []danmaku.Message, shared bool) (item, bool) {
	if len(msgs) == 0 {
		return item{}, false
	}
	b := danmaku.NewBatch(r.id, msgs)
	b.Epoch, b.Replay = r.tl.Epoch, true
	return r.replayOf(b, msgs[len(msgs)-1].Pos, shared)
}

// replayOf is the frame of b, a replay of positions up to last.
func (r *room) replayOf(b danmaku.Batch, last int64, shared bool) (item, bool) {
	if !shared {
		return item{Batch: &b, Pos: last, Epoch: b.Epoch, Room: r}, true
	}
	it, ok := r.encodeItem(b)
	if ok && len(b.Msgs) == 0 && last > 0 && b.Epoch != "" {
		it.Pos, it.Epoch, it.Room, it.Src = last, b.Epoch, r, &b
	}
	return it, ok
}

// replayEncoder returns the encoder of replay frames for viewers of slot:
// r.replayItem for the all tier, else one that thins msgs first. A
// thinned replay frame says how many normal messages of its positions
// were left out; one that keeps none of them is sent all the same (its
// msgs empty), so the viewer learns how many it skipped.
func (r *room) replayEncoder(slot int) timeline.Encoder[item] {
	cp := r.dc.tiers.Cap(slot)
	if cp == 0 {
		return r.replayItem
	}
	return func(msgs []danmaku.Message, shared bool) (item, bool) {
		if len(msgs) == 0 {
			return item{}, false
		}
		b := danmaku.NewBatch(r.id, nil)
		b.Epoch, b.Replay = r.tl.Epoch, true
		b.Msgs, b.Skipped = density.Thin(nil, msgs, r.needsLocked(msgs), cp)
		setThrough(&b, msgs[len(msgs)-1].Pos)
		return r.replayOf(b, msgs[len(msgs)-1].Pos, shared)
	}
}

// replayLocked appends to out the frames replaying the ring after
// position since (which the ring covers) for viewers of slot, the shared
// ones from the room's cache of the tier's replay blocks; r.mu is held.
func (r *room) replayLocked(since int64, slot int, out []item) []item {
	if slot == r.dc.tiers.All() {
		return r.replay.Replay(&r.tl, since, r.replayItem, out)
	}
	if len(r.tierReplay) != r.dc.tiers.Slots() {
		r.tierReplay = make([]timeline.Blocks[item], r.dc.tiers.Slots())
	}
	return r.tierReplay[slot].Replay(&r.tl, since, r.replayEncoder(slot), out)
}
