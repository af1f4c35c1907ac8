package timeline

import (
	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// Slice copies the ring's messages of the current epoch with positions in
// (p, end].
func (t *Timeline) Slice(p, end int64) []danmaku.Message {
	i := t.search(p)
	var out []danmaku.Message
	for ; i < t.ring.n; i++ {
		m := t.ring.at(i)
		if m.Pos > end {
			break
		}
		out = append(out, *m)
	}
	return out
}

// MergeRead applies to t the read of the history before push b (err: the
// read failed) and returns the messages it found before b, whether b's
// frame begins its epoch for the viewers, and whether b is stale: of an
// epoch that ended, Redis holding another one. The room's lock is held.
func (t *Timeline) MergeRead(b danmaku.Batch, h route.History, err error) (missing []danmaku.Message, start, stale bool) {
	first := b.Msgs[0].Pos
	switch {
	case err == nil && h.Epoch == b.Epoch:
		if t.Epoch != b.Epoch {
			t.SwitchEpoch(b.Epoch)
			t.Dels = h.Dels // the read has the epoch's tombstones
			start = true
		}
		t.Floor = max(t.Floor, h.First-1)
		for _, m := range h.Msgs {
			if m.Pos < first {
				missing = append(missing, m)
			}
		}
	case err == nil && t.Epoch != b.Epoch && h.Epoch != "":
		return nil, false, true
	case t.Epoch != b.Epoch:
		t.SwitchEpoch(b.Epoch)
		t.Dels = b.Dels
		start = true
	}
	return missing, start, false
}
