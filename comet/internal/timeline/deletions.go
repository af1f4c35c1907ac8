package timeline

import "github.com/danmaku/danmaku"

// goneMax bounds the deleted ids a room remembers.
const goneMax = 1024

// Remove deletes the messages ids from the ring and remembers them as
// gone. Frames encoded from the ring before may hold them: Gen moves, so
// caches of them drop them. It returns the number of ring entries
// removed.
func (t *Timeline) Remove(ids []string) int {
	del := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		t.Gone.Add(id, goneMax)
		if _, ok := t.ids[id]; ok {
			del[id] = struct{}{}
			delete(t.ids, id)
		}
	}
	if len(del) == 0 {
		return 0
	}
	n, inOld := t.ring.removeIf(t.old, func(m *danmaku.Message) bool {
		_, d := del[m.ID]
		return d
	})
	t.old -= inOld
	t.Gen++
	return n
}

// Visible returns msgs without tombstones and deleted ids; msgs itself
// when it has none of them.
func (t *Timeline) Visible(msgs []danmaku.Message) []danmaku.Message {
	for i := range msgs {
		if !msgs[i].Deleted && !t.Gone.Has(msgs[i].ID) {
			continue
		}
		out := append([]danmaku.Message(nil), msgs[:i]...)
		for _, m := range msgs[i+1:] {
			if !m.Deleted && !t.Gone.Has(m.ID) {
				out = append(out, m)
			}
		}
		return out
	}
	return msgs
}

// DelsBehind reports whether a push or a read of epoch counted more
// deleted ids than this comet applied.
func (t *Timeline) DelsBehind(epoch string, dels int64) bool {
	return t.Known && epoch != "" && epoch == t.Epoch && dels > t.Dels
}
