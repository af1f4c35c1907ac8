package comet

import (
	"github.com/danmaku/danmaku"
)

// replayBlock is the span of positions one shared replay frame covers.
// A resume's replay is the positions after since up to the next multiple
// of replayBlock (encoded for that viewer), then whole blocks and the
// last partial one, each encoded once per room and shared by every viewer
// resuming through it: a crowd resuming at once costs one encoding of the
// range, not one per viewer.
const replayBlock = 256

// replayCache holds a room's encoded replay blocks; guarded by the room's
// lock. A block's messages never change once its positions are at or
// below the last delivered one and above the ring's from, so a block
// stays valid until it falls out of the ring, or the timeline changes
// (gen: a new epoch, messages removed).
type replayCache struct {
	gen             uint64         // the timeline's gen the blocks are of
	blocks          map[int64]item // by the block's last position
	tail            item           // the partial block after the last whole one
	tailFrom, tail2 int64          // its range (tailFrom, tail2]
}

// current empties c when the timeline changed since it was filled.
func (c *replayCache) current(gen uint64) {
	if c.gen != gen {
		*c = replayCache{gen: gen}
	}
}

// replayItem returns a msgs frame with replay:true for msgs, encoded now
// when shared, else by the viewer's writer.
func (r *room) replayItem(msgs []danmaku.Message, shared bool) (item, bool) {
	if len(msgs) == 0 {
		return item{}, false
	}
	b := danmaku.NewBatch(r.id, msgs)
	b.Epoch, b.Replay = r.tl.Epoch, true
	last := msgs[len(msgs)-1].Pos
	if !shared {
		return item{Batch: &b, Pos: last, Epoch: b.Epoch, Room: r}, true
	}
	it, ok := r.encodeItem(b)
	return it, ok
}

// replayLocked appends to out the frames replaying the ring after
// position since (which the ring covers); r.mu is held.
func (r *room) replayLocked(since int64, out []item) []item {
	t := &r.tl
	c := &r.replay
	c.current(t.Gen)
	last := t.Last
	p := since
	if end := min(last, (p/replayBlock+1)*replayBlock); p < end {
		if it, ok := r.replayItem(t.Slice(p, end), false); ok {
			out = append(out, it)
		}
		p = end
	}
	if c.blocks == nil {
		c.blocks = map[int64]item{}
	}
	for ; p+replayBlock <= last; p += replayBlock {
		it, hit := c.blocks[p+replayBlock]
		if !hit {
			it, _ = r.replayItem(t.Slice(p, p+replayBlock), true)
			c.blocks[p+replayBlock] = it
		}
		if it.PM != nil {
			out = append(out, it)
		}
	}
	if p < last {
		if c.tailFrom != p || c.tail2 != last || c.tail.PM == nil {
			c.tail, _ = r.replayItem(t.Slice(p, last), true)
			c.tailFrom, c.tail2 = p, last
		}
		if c.tail.PM != nil {
			out = append(out, c.tail)
		}
	}
	for end := range c.blocks {
		if end-replayBlock < t.From {
			delete(c.blocks, end)
		}
	}
	return out
}
