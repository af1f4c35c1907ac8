// Package timeline is a comet's model of one room's timeline: the epoch,
// the positions delivered, the ring of recent messages that serves
// resumes, history on join and catch-ups, and the ids it drops as
// repeats or deletions. It holds no encoded frame and knows nothing of
// viewers; the comet's room guards it with its lock and caches the frames
// it encodes from it, keyed by Gen.
package timeline

import (
	"sort"
	"time"

	"github.com/danmaku/danmaku"
)

// Timeline is what a comet knows of one room's timeline: the epoch, the
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
type Timeline struct {
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

	Known bool   // epoch and last come from a push or from Redis
	Epoch string // "" with known: the room had no timeline when read
	Last  int64
	From  int64
	// Floor is the newest position known to be gone from the room's
	// history in Redis (trimmed or expired); reading before it is futile.
	Floor int64
	// Seen is when a push or a Redis read last confirmed the head.
	Seen time.Time
	// ReadFailed is when a read of the room's history last failed.
	ReadFailed time.Time
	// Syncs counts the reads of the room's head started, so a joiner can
	// tell whether one started after it arrived.
	Syncs uint64
	// Gone are the ids of messages deleted lately, Dels the number of ids
	// the room's deletion log holds for the epoch that this comet applied
	// (deletions.go).
	Gone IDSet
	Dels int64
	// rates are the estimates of BlockRate by block of positions, own
	// those of Rate by position in blocks without one (rate.go).
	rates map[int64]float64
	own   map[int64]float64
	// Gen counts the changes that make frames encoded from the ring
	// stale (a new epoch, removed messages), so the room's caches of them
	// can tell (room.replay, room.joinFrame).
	Gen uint64
}

// New returns an empty timeline whose ring holds up to size messages,
// and, when span (milliseconds) is positive, only those accepted within
// span of the newest beyond the newest keep.
func New(size int, span int64, keep int) Timeline {
	return Timeline{ring: ring{max: max(size, 1)}, ids: map[string]struct{}{}, span: span, keep: keep}
}

// Holds reports whether id is among the ids the timeline delivered and
// still filters (the ring's, and positionless ones).
func (t *Timeline) Holds(id string) bool {
	_, ok := t.ids[id]
	return ok
}

// Len is the number of messages in the ring.
func (t *Timeline) Len() int { return t.ring.n }

// Free is how many more messages the ring takes before it evicts.
func (t *Timeline) Free() int { return t.ring.max - t.ring.n }

// Prependable reports whether Prepend can put older messages in front:
// the ring holds no entry of an earlier epoch or without a position.
func (t *Timeline) Prependable() bool { return t.old == 0 }

// add appends m to the ring and its id to ids, evicting the oldest entry
// of a full ring, and the entries older than span before m beyond keep.
func (t *Timeline) add(m danmaku.Message) {
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
func (t *Timeline) evicted(ev danmaku.Message) {
	delete(t.ids, ev.ID)
	if t.old > 0 {
		t.old--
	} else if ev.Pos > t.From {
		t.From = ev.Pos
	}
}

// SwitchEpoch starts epoch e with nothing delivered; the ring's entries
// become old ones.
func (t *Timeline) SwitchEpoch(e string) {
	t.Known, t.Epoch = true, e
	t.Last, t.From, t.Floor, t.Dels = 0, 0, 0, 0
	t.old = t.ring.n
	t.rates, t.own = nil, nil
	t.Gen++
}

// Accept takes msgs (oldest first) for delivery and returns the ones to
// deliver: messages of the current epoch at or below the last delivered
// position, and ids already delivered, are dropped. Positioned messages
// advance last; a position beyond last+1 leaves a hole the ring does not
// cover (from moves up). Messages without a position (or for a room
// without a timeline) are filtered by id only. When nothing is dropped
// msgs itself is returned.
func (t *Timeline) Accept(msgs []danmaku.Message) (out []danmaku.Message, dropped int) {
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
func (t *Timeline) take(m danmaku.Message) bool {
	if m.Pos > 0 && t.Epoch != "" {
		if m.Pos <= t.Last {
			return false
		}
		if m.Pos > t.Last+1 {
			t.From = max(t.From, m.Pos-1)
		}
		t.Last = m.Pos
		if _, dup := t.ids[m.ID]; dup || m.Deleted || t.Gone.Has(m.ID) {
			return false
		}
		// Estimated now, while the ring holds what led up to it.
		t.BlockRate(m.Pos)
		t.add(m)
		t.Rate(m.Pos)
		return true
	}
	if _, dup := t.ids[m.ID]; dup || m.Deleted || t.Gone.Has(m.ID) {
		return false
	}
	if t.Epoch == "" {
		t.add(m) // a room without positions: remembered for its ids
	} else {
		t.ids[m.ID] = struct{}{} // cannot go in a positioned ring
	}
	return true
}

// Covers reports whether the ring holds every delivered message of epoch
// e after position p.
func (t *Timeline) Covers(e string, p int64) bool {
	return t.Known && e == t.Epoch && p >= t.From && p <= t.Last
}

// search returns the ring index of the first entry of the current epoch
// with a position beyond p.
func (t *Timeline) search(p int64) int {
	lo := t.old
	return lo + sort.Search(t.ring.n-lo, func(i int) bool { return t.ring.at(lo+i).Pos > p })
}

// After copies the ring's messages of the current epoch after position p,
// at most limit (the newest are cut off).
func (t *Timeline) After(p int64, limit int) []danmaku.Message {
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

// Recent copies the newest n messages of the current epoch.
func (t *Timeline) Recent(n int) []danmaku.Message {
	if t.Epoch == "" {
		return nil
	}
	i := max(t.old, t.ring.n-n)
	if i >= t.ring.n {
		return nil
	}
	return t.After(t.ring.at(i).Pos-1, n)
}

// Prepend puts older messages of the current epoch (oldest first, all at
// or below from) in front of the ring while it has room, and lowers from
// to since: the ring then covers (since, last]. It needs a ring without
// old entries.
func (t *Timeline) Prepend(msgs []danmaku.Message, since int64) {
	if t.old > 0 {
		return
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Pos > t.From || m.Deleted || t.Gone.Has(m.ID) {
			continue
		}
		if t.ring.full() {
			t.From = m.Pos
			return
		}
		if _, dup := t.ids[m.ID]; !dup {
			t.ids[m.ID] = struct{}{}
			t.ring.pushFront(m)
		}
	}
	t.From = min(t.From, since)
}
