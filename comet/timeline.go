package comet

import (
	"sort"
	"time"

	"github.com/danmaku/danmaku"
)

// timeline is what a comet knows of one room's timeline: the epoch, the
// last position it delivered to the room, and the ring of the messages it
// delivered (or loaded from the room's history). All of it is guarded by
// the room's lock.
//
// The ring is complete after position from: every message of the epoch
// with a position in (from, last] that the room's viewers were given is in
// it, in position order. Positions the comet skipped because their id was
// already delivered (a retry under a new position) are not in it; a
// viewer resuming after such a position has the message already. Nor are
// deleted messages (remove, and tombstones read from the history): their
// positions stay holes, which no reader takes for a gap, since coverage is
// a range of positions, not a count of messages.
//
// Ownership: the room owns its timeline; every field is read and written
// with the room's lock held, by whichever goroutine holds it (a push
// handler, the joiner whose turn it is, a history read under room.sync,
// the check loop, a del event); none blocks while holding it.
type timeline struct {
	ring ring
	ids  map[string]struct{} // ids of the ring's entries
	// span (ms) bounds the age of the entries beyond the newest keep: an
	// entry accepted more than span before the newest leaves the ring, so
	// a quiet room does not fill it over the hours; 0 keeps ring.max.
	span int64
	keep int
	// old is the number of entries at the front of the ring that belong
	// to an earlier epoch or carry no position; they only serve to drop
	// redelivered ids.
	old int

	known bool   // epoch and last come from a push or from Redis
	epoch string // "" with known: the room had no timeline when read
	last  int64
	from  int64
	// floor is the newest position known to be gone from the room's
	// history in Redis (trimmed or expired); reading before it is futile.
	floor int64
	// seen is when a push or a Redis read last confirmed the head.
	seen time.Time
	// readFailed is when a read of the room's history last failed.
	readFailed time.Time
	// syncs counts the reads of the room's head started, so a joiner can
	// tell whether one started after it arrived.
	syncs uint64
	// gone are the ids of messages deleted lately, dels the number of ids
	// the room's deletion log holds for the epoch that this comet applied
	// (moderation.go).
	gone idSet
	dels int64
	// gen counts the changes that make frames encoded from the ring
	// stale (a new epoch, removed messages), so the room's caches of them
	// can tell (room.replay, room.joinFrame).
	gen uint64
}

func newTimeline(size int) timeline {
	return timeline{ring: ring{max: max(size, 1)}, ids: map[string]struct{}{}}
}

// add appends m to the ring and its id to ids, evicting the oldest entry
// of a full ring, and the entries older than span before m beyond keep.
func (t *timeline) add(m danmaku.Message) {
	t.ids[m.ID] = struct{}{}
	if ev, ok := t.ring.pushBack(m); ok {
		t.evicted(ev)
	}
	if t.span <= 0 || m.TS <= 0 {
		return
	}
	for t.ring.n > t.keep {
		front := t.ring.at(0)
		if front.TS <= 0 || front.TS >= m.TS-t.span {
			break
		}
		t.evicted(t.ring.popFront())
	}
}

// evicted forgets ev, an entry that left the front of the ring.
func (t *timeline) evicted(ev danmaku.Message) {
	delete(t.ids, ev.ID)
	if t.old > 0 {
		t.old--
	} else if ev.Pos > t.from {
		t.from = ev.Pos
	}
}

// switchEpoch starts epoch e with nothing delivered; the ring's entries
// become old ones.
func (t *timeline) switchEpoch(e string) {
	t.known, t.epoch = true, e
	t.last, t.from, t.floor, t.dels = 0, 0, 0, 0
	t.old = t.ring.n
	t.gen++
}

// accept takes msgs (oldest first) for delivery and returns the ones to
// deliver: messages of the current epoch at or below the last delivered
// position, and ids already delivered, are dropped. Positioned messages
// advance last; a position beyond last+1 leaves a hole the ring does not
// cover (from moves up). Messages without a position (or for a room
// without a timeline) are filtered by id only. When nothing is dropped
// msgs itself is returned.
func (t *timeline) accept(msgs []danmaku.Message) (out []danmaku.Message, dropped int) {
	out = msgs
	copied := false
	for i, m := range msgs {
		keep := t.take(m)
		switch {
		case !keep && !copied:
			out = append(make([]danmaku.Message, 0, len(msgs)-1), msgs[:i]...)
			copied = true
			dropped++
		case !keep:
			dropped++
		case copied:
			out = append(out, m)
		}
	}
	return out, dropped
}

// take is accept for one message. A tombstone (a deleted message read
// from the history) advances last like the message would have, and is not
// delivered: its position stays a hole in the ring.
func (t *timeline) take(m danmaku.Message) bool {
	if m.Pos > 0 && t.epoch != "" {
		if m.Pos <= t.last {
			return false
		}
		if m.Pos > t.last+1 {
			t.from = max(t.from, m.Pos-1)
		}
		t.last = m.Pos
		if _, dup := t.ids[m.ID]; dup || m.Deleted || t.gone.has(m.ID) {
			return false
		}
		t.add(m)
		return true
	}
	if _, dup := t.ids[m.ID]; dup || m.Deleted || t.gone.has(m.ID) {
		return false
	}
	if t.epoch == "" {
		t.add(m) // a room without positions: remembered for its ids
	} else {
		t.ids[m.ID] = struct{}{} // cannot go in a positioned ring
	}
	return true
}

// covers reports whether the ring holds every delivered message of epoch
// e after position p.
func (t *timeline) covers(e string, p int64) bool {
	return t.known && e == t.epoch && p >= t.from && p <= t.last
}

// search returns the ring index of the first entry of the current epoch
// with a position beyond p.
func (t *timeline) search(p int64) int {
	lo := t.old
	return lo + sort.Search(t.ring.n-lo, func(i int) bool { return t.ring.at(lo+i).Pos > p })
}

// after copies the ring's messages of the current epoch after position p,
// at most limit (the newest are cut off).
func (t *timeline) after(p int64, limit int) []danmaku.Message {
	i := t.search(p)
	n := min(t.ring.n-i, limit)
	if n <= 0 {
		return nil
	}
	out := make([]danmaku.Message, n)
	for k := range n {
		out[k] = *t.ring.at(i + k)
	}
	return out
}

// recent copies the newest n messages of the current epoch.
func (t *timeline) recent(n int) []danmaku.Message {
	if t.epoch == "" {
		return nil
	}
	i := max(t.old, t.ring.n-n)
	if i >= t.ring.n {
		return nil
	}
	return t.after(t.ring.at(i).Pos-1, n)
}

// prepend puts older messages of the current epoch (oldest first, all at
// or below from) in front of the ring while it has room, and lowers from
// to since: the ring then covers (since, last]. It needs a ring without
// old entries.
func (t *timeline) prepend(msgs []danmaku.Message, since int64) {
	if t.old > 0 {
		return
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Pos > t.from || m.Deleted || t.gone.has(m.ID) {
			continue
		}
		if t.ring.full() {
			t.from = m.Pos
			return
		}
		if _, dup := t.ids[m.ID]; !dup {
			t.ids[m.ID] = struct{}{}
			t.ring.pushFront(m)
		}
	}
	t.from = min(t.from, since)
}
