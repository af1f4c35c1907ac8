package comet

import (
	"sync"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/timeline"
)

// room is the local viewers of one room and the comet's view of its
// timeline. A room whose last viewer left stays (ring and all) for
// roomLinger, so a viewer that comes straight back resumes from memory;
// the gap check then drops it.
//
// Ownership: id is set at creation and never changes. sync is taken by
// whichever goroutine reads the room's history (a pusher, a joiner, the
// gap check); mu guards every other field, which any goroutine holding it
// may change: the push handlers (delivery, tl), the joiners' line
// (joinLines: members, conns, tl, the caches), readers leaving (members,
// conns), the check loop (dead, when it drops the room). Nothing blocks on
// the network while holding mu.
type room struct {
	id string

	// sync is held while the room's timeline is read from Redis and
	// applied: one read per room at a time, whatever the number of viewers
	// waiting for it.
	sync sync.Mutex

	mu         sync.Mutex // guards the fields below
	conns      []*conn    // the viewers, for the fan-out
	members    []*member  // members[i] is conns[i]'s membership; member.idx is i
	dead       bool       // removed from its shard; look the room up again
	emptySince time.Time
	tl         timeline.Timeline
	// The room's settings (roomstate.go): stateKnown once read or pushed,
	// stateAt when.
	state      danmaku.RoomState
	stateKnown bool
	stateAt    time.Time
	pin        *danmaku.Pin // the room's pin (pin events, or read with the state)
	pinVer     int64

	// Density tiers (density.go): the comet's tiers, how many viewers may
	// be thinned, the viewers with a numeric uid, what each tier left out
	// since its last frame, the number of the last live frame and scratch
	// space for the needs of its messages.
	dc      *densityConf
	capped  int
	byUID   map[int64][]*member
	carry   []carry
	fanSeq  uint64
	needBuf []float64
	// Held-back frames of capped tiers (densityflush.go): the slot of the
	// viewers without a cap when the tiers last held, the last flush and
	// the timer of the next one (nil: none pending).
	autoWas    int
	lastFlush  time.Time
	flushTimer *time.Timer

	// live stamps the frames of the live delivery under way (encodeItem):
	// when it was handed to the viewers and whether it carries a
	// high-priority message; zero outside deliverMsgsLocked.
	live liveStamp

	// Frames encoded from the timeline, shared by the viewers that join
	// or resume through the same positions; tl.gen tells them stale.
	replay     timeline.Blocks[item]   // shared replay frames (replay.go)
	tierReplay []timeline.Blocks[item] // the same by density tier (made on first use)
	joinFrames []joinFrameCache        // the history-on-join frame by tier (join.go)
}

// liveStamp is what a live frame records for the fan-out lag metric.
type liveStamp struct {
	at   int64
	high bool
}

// joinFrameCache is a room's history-on-join frame for the range of
// positions (first, last] of epoch it holds, at the timeline's gen.
type joinFrameCache struct {
	it          item
	first, last int64
	epoch       string
	gen         uint64
}

// addLocked makes m's connection a viewer of r; r.mu is held.
func (r *room) addLocked(m *member) {
	m.r.Store(r)
	m.idx = len(r.members)
	r.members = append(r.members, m)
	r.conns = append(r.conns, m.c)
	m.slot = r.dc.tiers.All()
	r.setSlotLocked(m) // from the all tier: nothing held to hand over
	r.indexUIDLocked(m)
}

// removeLocked takes m out of r's density bookkeeping; r.mu is held.
func (r *room) removeLocked(m *member) {
	if !r.dc.everything(m.slot) {
		r.capped--
	}
	r.unindexUIDLocked(m)
}

// deliverLocked enqueues it to every viewer of r without blocking; r.mu
// is held. It returns the number of viewers the frame was handed to and
// appends the viewers to cut to slow (the caller disconnects them after
// the lock is released).
func (r *room) deliverLocked(it item, slow []*conn) (int, []*conn) {
	return enqueueAll(it, r.conns, slow)
}
