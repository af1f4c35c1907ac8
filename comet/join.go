package comet

import (
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/density"
	"github.com/danmaku/danmaku/comet/internal/timeline"
	"github.com/danmaku/danmaku/route"
)

// joinReq is a join: the room, and whether it resumes after position
// since of epoch.
type joinReq struct {
	room   string
	resume bool
	since  int64
	epoch  string
}

// in resolves req against the room's timeline t: a resume from position 0
// of no epoch comes from a viewer that joined the room before it had a
// timeline, so every message of the current epoch is new to it.
func (req joinReq) in(t *timeline.Timeline) joinReq {
	if req.resume && req.epoch == "" && req.since == 0 {
		req.epoch = t.Epoch
	}
	return req
}

// joinNeed is what a join needs from Redis before it can be served.
type joinNeed struct {
	sync bool  // read the room's head (and what its viewers lack)
	want int64 // the ring should cover positions after want (-1: nothing)
}

// needLocked works out what req needs; r.mu is held.
func (s *Server) needLocked(r *room, req joinReq, now time.Time) joinNeed {
	t := &r.tl
	req = req.in(t)
	n := joinNeed{want: -1}
	switch {
	case !t.Known:
		n.sync = true
	case len(r.members) == 0 && now.Sub(t.Seen) >= s.staleAfter():
		n.sync = true // nobody here kept it current
	case req.resume && req.epoch == t.Epoch && req.since > t.Last:
		n.sync = true // the viewer saw more elsewhere
	case req.resume && req.epoch != t.Epoch && now.Sub(t.Seen) >= freshFor:
		n.sync = true // perhaps the epoch changed
	}
	switch {
	case req.resume && req.epoch == t.Epoch && t.Epoch != "":
		n.want = req.since
	case s.cfg.HistoryOnJoin > 0 && t.Epoch != "":
		n.want = max(0, t.Last-int64(s.cfg.HistoryOnJoin))
	}
	return n
}

// direct is a range read for one resume that the ring cannot hold.
type direct struct {
	h     route.History
	since int64
}

// prepareJoin makes r's timeline ready to serve req: it reads the head
// when the comet's view may be out of date, and older history the ring
// lacks. Reads hold r.sync, and each joiner checks again once it holds
// it, so a crowd joining at once shares one read. It reports whether a
// read was made for this join, and the range read for a resume the ring
// cannot hold.
func (s *Server) prepareJoin(r *room, req joinReq) (read bool, d *direct) {
	now := time.Now()
	r.mu.Lock()
	need := s.needLocked(r, req, now)
	syncs := r.tl.Syncs
	quick := !need.sync && (need.want < 0 || need.want >= r.tl.From || r.tl.From <= r.tl.Floor)
	r.mu.Unlock()
	if quick {
		return false, nil
	}
	r.sync.Lock()
	defer r.sync.Unlock()
	r.mu.Lock()
	need = s.needLocked(r, req, now)
	doSync := need.sync && (r.tl.Syncs == syncs || !r.tl.Known)
	failing := now.Sub(r.tl.ReadFailed) < readBackoff
	r.mu.Unlock()
	if failing {
		// Redis did not answer a moment ago: serve what the comet holds
		// rather than have every joiner wait out its own timeout.
		return false, nil
	}
	if doSync {
		s.syncRoom(r, repairJoin)
		read = true
	}
	return s.backfill(r, req, now, read)
}

// backfill reads the older history req needs that the ring lacks, after
// prepareJoin brought the room's head up to date; the caller holds r.sync.
// It prepends what fits in the ring, and returns the range read for a
// resume beyond it.
func (s *Server) backfill(r *room, req joinReq, now time.Time, read bool) (bool, *direct) {
	r.mu.Lock()
	t := &r.tl
	need := s.needLocked(r, req, now)
	want, from, floor := need.want, t.From, t.Floor
	if want < 0 || want >= from || from <= floor {
		r.mu.Unlock()
		return read, nil
	}
	free := int64(t.Free())
	canPrepend := t.Prependable() && from-free <= want
	epoch := t.Epoch
	r.mu.Unlock()

	since := max(floor, want)
	if canPrepend {
		since = max(floor, from-free)
	} else if !req.resume {
		return read, nil
	}
	h, err := s.readHistory(r, since, int(from-since), "backfill")
	if err != nil || h.Epoch != epoch {
		return true, nil
	}
	r.mu.Lock()
	if r.tl.Epoch == epoch {
		r.tl.Floor = max(r.tl.Floor, h.First-1)
		if canPrepend {
			r.tl.Prepend(h.Msgs, max(since, h.First-1))
		}
	}
	r.mu.Unlock()
	if canPrepend {
		return true, nil
	}
	return true, &direct{h: h, since: since}
}

// joinPlan is what a joining viewer is sent after its welcome.
type joinPlan struct {
	recovered *bool
	ring      bool              // replay the ring after base
	msgs      []danmaku.Message // replayed, oldest first
	history   bool              // msgs are the history on join
	base      int64             // the position the viewer has before msgs
}

// planLocked works out the replay for req; r.mu is held.
func (s *Server) planLocked(r *room, req joinReq, d *direct) joinPlan {
	t := &r.tl
	req = req.in(t)
	var p joinPlan
	if req.resume {
		ok := true
		switch {
		case t.Covers(req.epoch, req.since):
			p.ring = true
		case req.epoch == t.Epoch && req.since == t.Last:
			// Up to what Redis and this comet hold: nothing to send. A
			// since beyond the head (read from Redis for this join) names
			// positions the room never had: not recovered, and the viewer
			// is served from the head like a fresh join.
		case d != nil && req.epoch == t.Epoch && d.h.Epoch == t.Epoch && d.h.First <= req.since+1 &&
			len(d.h.Msgs) > 0 && d.h.Msgs[len(d.h.Msgs)-1].Pos >= t.From:
			p.msgs = append(t.Visible(d.h.Msgs), t.After(d.h.Msgs[len(d.h.Msgs)-1].Pos, t.Len())...)
		default:
			ok = false
		}
		p.recovered = &ok
		if ok {
			p.base = req.since
			return p
		}
	}
	p.history = true
	p.base = t.Last
	if s.cfg.HistoryOnJoin > 0 {
		p.msgs = t.Recent(s.cfg.HistoryOnJoin)
		if len(p.msgs) > 0 {
			p.base = p.msgs[0].Pos - 1
		}
	}
	return p
}

// historyItemLocked returns the history-on-join frame of msgs for
// viewers of slot, encoded once per head of the room and tier; r.mu is
// held. It returns no frame when the tier keeps none of msgs.
func (r *room) historyItemLocked(msgs []danmaku.Message, slot int) item {
	t := &r.tl
	first, last := msgs[0].Pos, msgs[len(msgs)-1].Pos
	if len(r.joinFrames) != r.dc.tiers.Slots() {
		r.joinFrames = make([]joinFrameCache, r.dc.tiers.Slots())
	}
	j := &r.joinFrames[slot]
	if j.it.PM != nil && j.first == first && j.last == last && j.epoch == t.Epoch && j.gen == t.Gen {
		return j.it
	}
	b := danmaku.NewBatch(r.id, msgs)
	b.Epoch, b.Replay = t.Epoch, true
	if cp := r.dc.tiers.Cap(slot); cp > 0 {
		b.Msgs, b.Skipped = density.Thin(nil, msgs, r.needsLocked(msgs), cp)
		setThrough(&b, last)
	}
	if len(b.Msgs) == 0 {
		return item{}
	}
	it, ok := r.encodeItem(b)
	if !ok {
		return item{}
	}
	*j = joinFrameCache{it: it, first: first, last: last, epoch: t.Epoch, gen: t.Gen}
	return it
}

// enter makes m's connection a viewer of req.room (see enterNow). The
// joins of one room run one after another on the goroutine of the first
// joiner (joinLines): a crowd joining at once would otherwise queue on the
// room's lock, and each hand-over of a contended lock costs a trip
// through the scheduler.
func (s *Server) enter(m *member, req joinReq, w welcomeFrame) {
	s.joins.run(req.room, func() { s.enterNow(m, req, w) })
}

// enterNow makes m's connection a viewer of req.room and queues its welcome
// and replay under the room's lock, so every live frame of the room comes
// after them and carries only positions after the replay's.
func (s *Server) enterNow(m *member, req joinReq, w welcomeFrame) {
	c := m.c
	if c.isClosed() {
		return // gone while it waited its turn; its release undoes the rest
	}
	rm := s.hub.roomFor(req.room)
	read, d := s.prepareJoin(rm, req)
	s.ensureState(rm)
	r := s.hub.lockRoom(req.room)
	p := s.planLocked(r, req, d)
	t := &r.tl
	r.addLocked(m)
	slot := r.slotLocked(m)
	w.Epoch, w.Pos, w.Recovered, w.State = t.Epoch, t.Last, p.recovered, r.stateLocked()
	w.Density = r.dc.tiers.Cap(slot)
	w.Pin = r.pinLocked(time.Now())
	c.w.SetGot(r, t.Epoch, p.base)
	res := c.enqueue(item{PM: prepare(w), Size: len(c.id) + len(req.room) + 96})
	m.online = w.Online
	var items []item
	switch {
	case p.ring:
		items = r.replayLocked(p.base, slot, nil)
	case len(p.msgs) == 0:
	case p.history:
		items = append(items, r.historyItemLocked(p.msgs, slot))
	default:
		enc := r.replayEncoder(slot)
		for msgs := p.msgs; len(msgs) > 0; msgs = msgs[min(len(msgs), replayChunk):] {
			it, _ := enc(msgs[:min(len(msgs), replayChunk)], false)
			items = append(items, it)
		}
	}
	for _, it := range items {
		if res == enqueued && (it.PM != nil || it.Batch != nil) {
			res = c.enqueue(it)
		}
	}
	r.mu.Unlock()
	s.metrics.joined(p.recovered, len(items) > 0, read)
	if res == queueFull {
		c.slowConsumer()
	}
}
