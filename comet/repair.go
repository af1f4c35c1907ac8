package comet

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// Timeline repair. A comet delivers each room's messages in position
// order without holes: a push whose first position is beyond the last one
// delivered (or of an epoch it has not seen from its start) first has the
// missing range read from the room's history in Redis, and the gap check
// reads the heads of quiet rooms so a lost push is repaired even when no
// later one comes. Every read of a room holds room.sync, so a room costs at
// most one Redis read at a time however many viewers wait for it.
//
// Memory: a room with local viewers keeps the messages of its last
// RingSpan, at least 100 and at most RingSize (the ring grows by doubling,
// so a quiet room holds few); a room without viewers drops its ring after
// roomLinger. The gap check costs one HMGET
// per quiet room per GapCheck, pipelined.

// roomLinger is how long a room without local viewers keeps its ring.
const roomLinger = 30 * time.Second

// freshFor is how long a push or a read vouches for a room's epoch: a
// resume naming another epoch within it is answered without reading Redis.
const freshFor = 250 * time.Millisecond

// replayChunk is the most messages one replay frame carries.
const replayChunk = 1000

// headsChunk is the most rooms one Heads pipeline asks for.
const headsChunk = 512

// encodeItem encodes a msgs frame of r once for every viewer it goes to.
func (r *room) encodeItem(b danmaku.Batch) (item, bool) {
	data, err := json.Marshal(b)
	if err != nil {
		return item{}, false
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		return item{}, false
	}
	it := item{PM: pm, Size: len(data), Live: r.live.at, High: r.live.high}
	if n := len(b.Msgs); n > 0 && b.Epoch != "" && b.Msgs[n-1].Pos > 0 {
		it.Pos, it.Epoch, it.Room, it.Src = b.Msgs[n-1].Pos, b.Epoch, r, &b
	}
	return it, true
}

// deliverMsgsLocked sends msgs of the room's current epoch to its viewers
// as one live frame; r.mu is held. start marks the frame that begins the
// epoch for them.
func (r *room) deliverMsgsLocked(msgs []danmaku.Message, start bool, slow []*conn) (int, []*conn) {
	if len(msgs) == 0 || len(r.members) == 0 {
		return 0, slow
	}
	r.live = liveStamp{at: time.Now().UnixNano(), high: normalCount(msgs) < int64(len(msgs))}
	defer func() { r.live = liveStamp{} }()
	if r.capped > 0 {
		return r.deliverTiersLocked(msgs, start, slow)
	}
	r.dc.thinned(r.dc.tiers.All(), normalCount(msgs), 0)
	b := danmaku.NewBatch(r.id, msgs)
	b.Epoch = r.tl.Epoch
	it, ok := r.encodeItem(b)
	if !ok {
		return 0, slow
	}
	it.EpochStart = start && it.Pos > 0
	return r.deliverLocked(it, slow)
}

// pushNeedsRead reports whether push b needs the room's history read
// first; r.mu is held. A room the comet knows nothing of starts at the
// push, and a room without a timeline at an epoch's first position: both
// report started.
func (r *room) pushNeedsRead(b danmaku.Batch) (need, started bool) {
	t := &r.tl
	if len(b.Msgs) == 0 || b.Epoch == "" || b.Msgs[0].Pos <= 0 {
		return false, false
	}
	first := b.Msgs[0].Pos
	switch {
	case !t.Known, t.Epoch == "" && first == 1:
		t.SwitchEpoch(b.Epoch)
		t.Dels = b.Dels // nothing of the epoch here to delete
		return false, true
	case b.Epoch == t.Epoch:
		return first > t.Last+1, false
	}
	return true, false
}

// pushLocked delivers b; r.mu is held and b needs no read.
func (r *room) pushLocked(b danmaku.Batch, start bool, now time.Time) (n, dropped int, slow []*conn) {
	out, dropped := r.tl.Accept(b.Msgs)
	if b.Epoch != "" && b.Epoch == r.tl.Epoch {
		r.tl.Seen = now
	}
	n, slow = r.deliverMsgsLocked(out, start, nil)
	return n, dropped, slow
}

// broadcast hands b to the room's local viewers, after the messages
// missing before it; see Broadcast.
func (s *Server) broadcast(b danmaku.Batch) (delivered, dups int) {
	r := s.hub.room(b.Room)
	if r == nil {
		return 0, 0
	}
	r.mu.Lock()
	if r.dead {
		r.mu.Unlock()
		return 0, 0
	}
	need, started := r.pushNeedsRead(b)
	if need {
		r.mu.Unlock()
		return s.repairPush(r, b)
	}
	n, dups, slow := r.pushLocked(b, started, time.Now())
	behind := r.tl.DelsBehind(b.Epoch, b.Dels)
	r.mu.Unlock()
	s.cut(slow)
	if behind {
		r.sync.Lock()
		s.syncDels(r)
		r.sync.Unlock()
	}
	return n, dups
}

// cut disconnects viewers whose queue overflowed beyond a catch-up.
func (s *Server) cut(slow []*conn) {
	for _, c := range slow {
		c.slowConsumer()
	}
}

// repairPush reads what is missing before push b (same epoch: after the
// last delivered position; a new epoch: from its start) and delivers it
// and then b, in one frame. A push of an epoch Redis no longer has while
// the room's current one is in Redis is stale and dropped.
func (s *Server) repairPush(r *room, b danmaku.Batch) (delivered, dups int) {
	r.sync.Lock()
	defer r.sync.Unlock()
	now := time.Now()
	r.mu.Lock()
	if r.dead {
		r.mu.Unlock()
		return 0, 0
	}
	if need, started := r.pushNeedsRead(b); !need {
		n, dups, slow := r.pushLocked(b, started, now)
		behind := r.tl.DelsBehind(b.Epoch, b.Dels)
		r.mu.Unlock()
		s.cut(slow)
		if behind {
			s.syncDels(r)
		}
		return n, dups
	}
	first := b.Msgs[0].Pos
	since := int64(0)
	if b.Epoch == r.tl.Epoch {
		since = r.tl.Last
	}
	r.mu.Unlock()

	since = max(since, first-1-int64(s.cfg.RingSize))
	h, err := s.readHistory(r, since, int(max(1, first-1-since)), "push")
	r.mu.Lock()
	t := &r.tl
	missing, start, stale := t.MergeRead(b, h, err)
	if stale {
		r.mu.Unlock()
		s.metrics.stale(len(b.Msgs))
		return 0, len(b.Msgs) // an epoch that ended
	}
	fresh, _ := t.Accept(missing)
	out, dups := t.Accept(b.Msgs)
	t.Seen = now
	all := append(fresh, out...)
	n, slow := r.deliverMsgsLocked(all, start, nil)
	dels := b.Dels
	if h.Epoch == b.Epoch {
		dels = max(dels, h.Dels)
	}
	behind := t.DelsBehind(b.Epoch, dels)
	r.mu.Unlock()
	s.cut(slow)
	if behind {
		s.syncDels(r)
	}
	if len(fresh) > 0 {
		s.metrics.repaired(repairPushGap, len(fresh))
	}
	return n, dups
}

// readBackoff is how long after a failed read of a room's history its
// joiners are served from what the comet holds, without reading (see
// prepareJoin: a crowd of joiners would otherwise wait out one timeout
// each). Pushes and the gap check still read: a gap they leave is a loss.
const readBackoff = time.Second

// readHistory reads r's history with the comet's Redis timeout, counts
// the read, and records when one fails (timeline.readFailed).
func (s *Server) readHistory(r *room, since int64, limit int, reason string) (route.History, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	s.metrics.historyRead(reason)
	h, err := s.rt.History(ctx, r.id, since, limit)
	if err != nil {
		s.metrics.registryError()
		s.log.Warn("read room history", zap.String("room", r.id), zap.Error(err))
		r.mu.Lock()
		r.tl.ReadFailed = time.Now()
		r.mu.Unlock()
	}
	return h, err
}

// syncRoom brings r up to the head of its timeline in Redis and delivers
// what its viewers lacked: the messages after the last delivered position
// (at most RingSize per call), or, for a new epoch, the epoch from its
// start. A room this comet knew nothing of is loaded with its newest
// messages. The caller holds r.sync.
func (s *Server) syncRoom(r *room, reason string) {
	r.mu.Lock()
	t := &r.tl
	known, epoch, since := t.Known, t.Epoch, t.Last
	limit := s.cfg.RingSize
	if !known {
		since, limit = -1, s.initLoad()
	}
	t.Syncs++
	r.mu.Unlock()

	h, err := s.readHistory(r, since, limit, reason)
	if err == nil && known && h.Epoch != "" && h.Epoch != epoch && since > 0 {
		since = max(0, h.Last-int64(limit))
		h, err = s.readHistory(r, since, limit, reason)
	}
	if err != nil {
		return
	}
	r.mu.Lock()
	n, slow := r.applyLocked(h, reason)
	behind := r.tl.DelsBehind(h.Epoch, h.Dels)
	r.mu.Unlock()
	s.cut(slow)
	if n > 0 && known {
		s.metrics.repaired(reason, n)
	}
	if behind {
		s.syncDels(r)
	}
}

// staleAfter is how long a room's view stays current without a push or a
// read: GapCheck, or a second with the gap check off.
func (s *Server) staleAfter() time.Duration {
	if s.cfg.GapCheck > 0 {
		return s.cfg.GapCheck
	}
	return time.Second
}

// initLoad is how many messages a room new to this comet is loaded with.
func (s *Server) initLoad() int {
	return s.hub.ringKeep
}

// applyLocked merges a history read into r's timeline and delivers the
// messages its viewers lacked; r.mu is held. It returns how many messages
// were new.
func (r *room) applyLocked(h route.History, _ string) (int, []*conn) {
	t := &r.tl
	t.Seen = time.Now()
	if h.Epoch == "" {
		if !t.Known {
			t.SwitchEpoch("")
		}
		return 0, nil
	}
	start := false
	if !t.Known || h.Epoch != t.Epoch {
		t.SwitchEpoch(h.Epoch)
		t.Dels = h.Dels // the read has the epoch's tombstones
		start = true
	}
	t.Floor = max(t.Floor, h.First-1)
	out, _ := t.Accept(h.Msgs)
	if len(h.Msgs) == 0 && h.Last > t.Last {
		t.Last, t.From = h.Last, h.Last // nothing kept to deliver: start at the head
	}
	_, slow := r.deliverMsgsLocked(out, start, nil)
	return len(out), slow
}

// checkLoop is the gap check: every GapCheck it reads, in one pipeline,
// the timeline heads of the rooms with local viewers that had no push for
// that long, and repairs each room whose head is beyond what this comet
// delivered. It also drops rooms that have had no viewer for roomLinger
// (with the check off it runs for that alone).
func (s *Server) checkLoop() {
	defer s.bg.Done()
	t := time.NewTicker(s.staleAfter())
	defer t.Stop()
	var buf []*room
	for {
		select {
		case <-s.quit:
			return
		case now := <-t.C:
			buf = s.checkRooms(buf[:0], now)
		}
	}
}

// checkRooms runs one round of the gap check; buf is scratch space.
func (s *Server) checkRooms(buf []*room, now time.Time) []*room {
	var quiet []*room
	for i := range numShards {
		buf = s.hub.rooms(i, buf[:0])
		for _, r := range buf {
			r.mu.Lock()
			idle := len(r.members) == 0
			stale := !idle && s.cfg.GapCheck > 0 && now.Sub(r.tl.Seen) >= s.cfg.GapCheck
			r.mu.Unlock()
			switch {
			case idle:
				s.hub.drop(r, roomLinger, now)
			case stale:
				quiet = append(quiet, r)
			}
		}
	}
	clear(buf)
	for len(quiet) > 0 {
		n := min(len(quiet), headsChunk)
		s.checkHeads(quiet[:n])
		quiet = quiet[n:]
	}
	return buf
}

// checkHeads reads the heads of rooms and repairs those behind.
func (s *Server) checkHeads(rooms []*room) {
	ids := make([]string, len(rooms))
	for i, r := range rooms {
		ids[i] = r.id
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	heads, err := s.rt.Heads(ctx, ids)
	cancel()
	if err != nil {
		s.metrics.registryError()
		s.log.Warn("gap check: read heads", zap.Int("rooms", len(ids)), zap.Error(err))
		return
	}
	now := time.Now()
	for _, r := range rooms {
		h := heads[r.id]
		r.mu.Lock()
		t := &r.tl
		behind := h.Epoch != "" && (!t.Known || h.Epoch != t.Epoch || h.Last > t.Last || h.Dels > t.Dels)
		if !behind {
			t.Seen = now
		}
		r.mu.Unlock()
		if behind {
			r.sync.Lock()
			s.syncRoom(r, repairCheck)
			r.sync.Unlock()
		}
	}
}
