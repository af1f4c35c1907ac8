package comet

import (
	"github.com/danmaku/danmaku"
)

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
// position since (which the ring covers), the shared ones from the room's
// cache of replay blocks; r.mu is held.
func (r *room) replayLocked(since int64, out []item) []item {
	return r.replay.Replay(&r.tl, since, r.replayItem, out)
}
