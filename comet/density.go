package comet

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/density"
	"github.com/danmaku/danmaku/internal/auth"
)

// Density tiers (comet/internal/density). A viewer asks for at most N
// normal messages a second per room: the /ws parameter density=N, the
// frame {"op":"density","room":R,"max":N}, or its token's density claim.
// What wins, per room: the latest density op naming the room, then the
// latest density op without a room, then the URL parameter, then the token
// claim (accept.go); a viewer that asked for nothing is served every message, or, in a
// room whose rate is above Config.DensityHotRate, the tier of
// Config.DensityHotCap. A request maps to a tier (density.Tiers.Slot).
//
// Each batch is thinned and encoded once per tier with viewers, and the
// viewers of a tier share its frame. A normal message a viewer's tier
// leaves out but that the viewer sent itself (its uid is the message's)
// still reaches it: the room indexes its viewers by uid, and the few that
// sent a left-out message get the batch encoded for them alone (their
// tier's frame plus their own messages). Replays (history on join, resume,
// catch-up) are thinned by the same rule, so a resumed viewer gets its
// tier's subset of what it missed and every high-priority message; its own
// messages left out by its tier are not added to a replay.

// noCap is a request for no cap in particular: the room's default.
const noCap = -1

// slotAuto is the slot of a viewer that asked for nothing: resolved per
// batch (every message, or the hot-room cap).
const slotAuto = -1

// densityConf is the comet's tiers and hot-room default; shared by every
// room, never changed.
type densityConf struct {
	tiers   density.Tiers
	hotRate float64 // messages a second above which a room is hot; 0: never
	hotSlot int     // the slot a hot room serves its viewers that asked nothing
	// flushEvery is Config.DensityFlush (densityflush.go).
	flushEvery time.Duration
	// kept and skipped count, by slot, the normal messages of live
	// batches each tier's frame kept and left out (nil: not counted).
	kept, skipped []prometheus.Counter
}

// count resolves, for every slot, its series of kept and skipped (label
// tier: the cap, or all), which also makes them exist from the start.
func (d *densityConf) count(kept, skipped *prometheus.CounterVec) {
	for s := range d.tiers.Slots() {
		tier := "all"
		if cp := d.tiers.Cap(s); cp > 0 {
			tier = strconv.Itoa(cp)
		}
		d.kept = append(d.kept, kept.WithLabelValues(tier))
		d.skipped = append(d.skipped, skipped.WithLabelValues(tier))
	}
}

// thinned counts what a tier's frame of a live batch with normal normal
// messages kept of them, and left out.
func (d *densityConf) thinned(slot int, normal, skipped int64) {
	if slot >= len(d.kept) {
		return
	}
	d.kept[slot].Add(float64(normal - skipped))
	if skipped > 0 {
		d.skipped[slot].Add(float64(skipped))
	}
}

func newDensityConf(cfg Config) *densityConf {
	tiers, err := density.NewTiers(cfg.DensityTiers)
	if err != nil {
		tiers, _ = density.NewTiers(nil) // Validate refused it already
	}
	return &densityConf{tiers: tiers, hotRate: cfg.DensityHotRate, hotSlot: tiers.Slot(cfg.DensityHotCap),
		flushEvery: cfg.DensityFlush}
}

// want is the slot a request for at most max normal messages a second
// asks for (noCap: slotAuto).
func (d *densityConf) want(max int) int {
	if max == noCap {
		return slotAuto
	}
	return d.tiers.Slot(max)
}

// autoSlot is the slot serving r's viewers that asked for nothing; r.mu
// is held.
func (r *room) autoSlotLocked() int {
	d := r.dc
	if d.hotRate > 0 && r.tl.BlockRate(r.tl.Last) > d.hotRate {
		return d.hotSlot
	}
	return d.tiers.All()
}

// slotLocked is the slot m is served in now; r.mu is held.
func (r *room) slotLocked(m *member) int {
	if m.slot == slotAuto {
		return r.autoSlotLocked()
	}
	return m.slot
}

// everything reports whether a viewer of slot gets every message
// whatever the room's rate.
func (d *densityConf) everything(slot int) bool {
	return slot == d.tiers.All() || slot == slotAuto && d.hotRate == 0
}

// setSlotLocked puts m, a viewer of r, in the slot its request asks for;
// r.mu is held. r.capped counts the viewers that may be thinned. A viewer
// that changes tier is handed what its old tier held back for it and
// marked with what the new one left out so far (densityflush.go); it
// reports whether the viewer's queue overflowed.
func (r *room) setSlotLocked(m *member) (slow bool) {
	old := r.slotLocked(m)
	if !r.dc.everything(m.slot) {
		r.capped--
	}
	m.slot = r.dc.want(int(m.req.Load()))
	if !r.dc.everything(m.slot) {
		r.capped++
	}
	if now := r.slotLocked(m); now != old {
		slow = r.handOverLocked(m, old)
		r.markLocked(m, now)
	}
	return slow
}

// needsLocked returns the need of each of msgs (density.Need) in r's
// scratch buffer; r.mu is held.
func (r *room) needsLocked(msgs []danmaku.Message) []float64 {
	needs := r.needBuf[:0]
	for i := range msgs {
		needs = append(needs, density.Need(&msgs[i], r.tl.Rate(msgs[i].Pos)))
	}
	r.needBuf = needs
	return needs
}

// fanOut is one live frame of a room on its way to the viewers: the
// frame of each tier, built when the first viewer of the tier is met.
// flush tells whether capped tiers that hold messages back
// (densityflush.go) send them with this batch; a batch without messages
// is such a flush alone.
type fanOut struct {
	r     *room
	msgs  []danmaku.Message
	needs []float64
	start bool
	flush bool
	auto  int
	built []bool
	items []item   // by slot; PM nil: nothing for the tier in this batch
	gens  []uint64 // by slot: the generation of the carry the frame sent
	used  []bool   // by slot: the tier has viewers in the room
}

func (r *room) newFanOut(msgs []danmaku.Message, start, flush bool, auto int) *fanOut {
	slots := r.dc.tiers.Slots()
	return &fanOut{r: r, msgs: msgs, needs: r.needsLocked(msgs), start: start, flush: flush, auto: auto,
		built: make([]bool, slots), items: make([]item, slots), gens: make([]uint64, slots), used: make([]bool, slots)}
}

// slotOf is the slot m is served this frame.
func (f *fanOut) slotOf(m *member) int {
	if m.slot == slotAuto {
		return f.auto
	}
	return m.slot
}

// count adds what each tier with viewers kept of the batch and left out
// to the comet's counts (densityConf.thinned), whether its viewers got
// the tier's frame or one of their own.
func (f *fanOut) count() {
	d := f.r.dc
	normal := normalCount(f.msgs)
	for s, used := range f.used {
		if !used {
			continue
		}
		var skipped int64
		if cp := d.tiers.Cap(s); cp > 0 {
			for _, n := range f.needs {
				if !density.Keeps(n, cp) {
					skipped++
				}
			}
		}
		d.thinned(s, normal, skipped)
	}
}

// normalCount is the number of normal (not high-priority) messages of
// msgs.
func normalCount(msgs []danmaku.Message) int64 {
	var n int64
	for i := range msgs {
		if msgs[i].Priority != danmaku.PriorityHigh {
			n++
		}
	}
	return n
}

// item returns the frame of slot, thinning and encoding it on first use:
// what the tier held back (its carry) and what it keeps of the batch. A
// tier that keeps nothing, or that holds its messages back this batch
// (holds), gets no frame: what it keeps and leaves out is carried to its
// next one.
func (f *fanOut) item(slot int) item {
	if f.built[slot] {
		return f.items[slot]
	}
	f.built[slot] = true
	r := f.r
	c := &r.carry[slot]
	f.gens[slot] = c.gen
	if f.holds(slot) {
		c.hold(f.msgs, f.needs, r.dc.tiers.Cap(slot), f.start, r.tl.Epoch)
		return item{}
	}
	b := danmaku.NewBatch(r.id, f.msgs)
	b.Epoch = r.tl.Epoch
	if len(c.msgs) > 0 {
		b.Epoch = c.epoch
	}
	cp := r.dc.tiers.Cap(slot)
	if cp > 0 {
		var skipped int64
		b.Msgs, skipped = density.Thin(c.msgs, f.msgs, f.needs, cp)
		b.Skipped = c.skipped + skipped
	}
	if len(b.Msgs) == 0 {
		c.skipped, c.start = b.Skipped, c.start || f.start
		return item{}
	}
	if cp > 0 {
		setThrough(&b, r.through(b.Epoch, b.Msgs[len(b.Msgs)-1].Pos))
	}
	it, ok := r.encodeItem(b)
	if ok && b.Through > 0 {
		it.Pos = b.Through
	}
	if ok {
		it.EpochStart = (f.start || c.start) && it.Pos > 0
		*c = carry{gen: c.gen + 1}
	}
	f.items[slot] = it
	return it
}

// deliverTiersLocked sends msgs to r's viewers, each its tier's frame
// (a frame of its own to a viewer its tier left a message of its own
// out for); r.mu is held. It returns the number of viewers given a frame.
// Capped tiers may hold their messages back for a while
// (densityflush.go): then the frames go out with a later batch or when
// the room's flush timer fires.
func (r *room) deliverTiersLocked(msgs []danmaku.Message, start bool, slow []*conn) (int, []*conn) {
	now := time.Now()
	auto := r.autoSlotLocked()
	n := 0
	if len(r.carry) != r.dc.tiers.Slots() {
		r.carry = make([]carry, r.dc.tiers.Slots())
		r.autoWas = auto
	}
	if (auto != r.autoWas || start) && r.holdingLocked() {
		// What was held back goes to the viewers it was held for first:
		// the viewers without a cap changed tier, or a new epoch began.
		n, slow = r.flushLocked(r.autoWas, now, slow)
	}
	r.autoWas = auto
	f := r.newFanOut(msgs, start, r.flushDueLocked(msgs, now), auto)
	if f.flush {
		r.lastFlush = now
	}
	k, slow := r.fanLocked(f, slow)
	r.armFlushLocked(now)
	return n + k, slow
}

// fanLocked hands f's frames to r's viewers; r.mu is held.
func (r *room) fanLocked(f *fanOut, slow []*conn) (int, []*conn) {
	r.fanSeq++
	n, slow := r.deliverOwnLocked(f, slow)
	for _, m := range r.members {
		if m.ownSeq == r.fanSeq {
			continue
		}
		s := f.slotOf(m)
		f.used[s] = true
		it := f.item(s)
		if it.PM == nil {
			continue
		}
		if m.mark.slot == s && m.mark.gen == f.gens[s] && m.mark.skipped > 0 {
			it = lessSkipped(it, m.mark.skipped)
		}
		n, slow = tally(m.c.enqueue(it), m.c, n, slow)
	}
	for s, used := range f.used {
		if used {
			f.item(s) // a tier whose viewers all got frames of their own still moves its carry on
		}
	}
	f.count()
	return n, slow
}

// deliverOwnLocked finds the viewers whose tier leaves out a message they
// sent, or holds it back, marks them (ownSeq) and queues each the batch
// encoded for it alone; r.mu is held.
func (r *room) deliverOwnLocked(f *fanOut, slow []*conn) (int, []*conn) {
	if len(r.byUID) == 0 {
		return 0, slow
	}
	n := 0
	for i := range f.msgs {
		if f.needs[i] == 0 {
			continue
		}
		for _, m := range r.byUID[f.msgs[i].UID] {
			s := f.slotOf(m)
			if m.ownSeq == r.fanSeq || density.Keeps(f.needs[i], r.dc.tiers.Cap(s)) && !f.holds(s) {
				continue
			}
			m.ownSeq = r.fanSeq
			f.used[s] = true
			n, slow = tally(m.c.enqueue(f.ownItem(m, s)), m.c, n, slow)
		}
	}
	return n, slow
}

// ownItem is the batch for m, a viewer of slot whose uid sent a message
// of the batch the tier leaves out or holds back: what the tier held back,
// the tier's messages of the batch and the viewer's own, encoded by its
// writer. When the tier goes on holding, m is marked with what the tier
// left out so far, so its next frame counts only the rest.
func (f *fanOut) ownItem(m *member, slot int) item {
	r := f.r
	cp := r.dc.tiers.Cap(slot)
	c := &r.carry[slot]
	b := danmaku.NewBatch(r.id, append([]danmaku.Message(nil), c.msgs...))
	b.Epoch = r.tl.Epoch
	b.Skipped = c.skipped
	var skipped int64
	for i := range f.msgs {
		switch {
		case density.Keeps(f.needs[i], cp):
			b.Msgs = append(b.Msgs, f.msgs[i])
		case f.msgs[i].UID == m.uid:
			b.Msgs = append(b.Msgs, f.msgs[i]) // left out by the tier, not for m
			skipped++
		default:
			b.Skipped++
			skipped++
		}
	}
	if m.mark.slot == slot && m.mark.gen == c.gen {
		b.Skipped -= m.mark.skipped
	}
	if f.holds(slot) {
		m.mark = mark{slot: slot, gen: c.gen, skipped: c.skipped + skipped}
	}
	b.Skipped = max(b.Skipped, 0)
	it := r.soloItem(&b)
	it.EpochStart = it.Pos > 0 && (f.start || c.start)
	return it
}

// indexUIDLocked adds m to r's viewers by uid; r.mu is held.
func (r *room) indexUIDLocked(m *member) {
	if !m.hasUID {
		return
	}
	if r.byUID == nil {
		r.byUID = map[int64][]*member{}
	}
	r.byUID[m.uid] = append(r.byUID[m.uid], m)
}

// unindexUIDLocked removes m from r's viewers by uid; r.mu is held.
func (r *room) unindexUIDLocked(m *member) {
	if !m.hasUID {
		return
	}
	unindex(r.byUID, m.uid, m)
}

// setDensity serves a density op: at most max normal messages a second
// in room, or, with room "", in every room of the connection and those it
// joins later. It answers with a density frame naming the tier now served
// (an error frame not_subscribed for a room the connection does not
// hold). The next live frame of the room is of that tier.
func (c *conn) setDensity(room string, max int) {
	d := c.s.hub.density
	if room == "" {
		c.density = max
		for _, m := range c.memberList() {
			c.applyDensity(m, max)
		}
		c.send(prepare(densityFrame{Op: opDensity, Max: d.tiers.Cap(d.want(max))}), 40)
		return
	}
	m := c.member(room)
	if m == nil {
		c.s.metrics.badFrame(codeNotSubbed)
		c.sendRoomError(room, codeNotSubbed, "room "+room+" is not one of the connection's rooms")
		return
	}
	served := c.applyDensity(m, max)
	c.send(prepare(densityFrame{Op: opDensity, Room: room, Max: served}), len(room)+48)
}

// applyDensity makes m ask for max and returns the cap it is served. A
// member still joining reads its request once it is in the room.
func (c *conn) applyDensity(m *member, max int) int {
	m.req.Store(int32(max))
	d := c.s.hub.density
	r := m.r.Load()
	if r == nil {
		return d.tiers.Cap(d.want(max))
	}
	r.mu.Lock()
	if m.r.Load() != r {
		r.mu.Unlock()
		return d.tiers.Cap(d.want(max))
	}
	slow := r.setSlotLocked(m)
	served := d.tiers.Cap(r.slotLocked(m))
	r.mu.Unlock()
	if slow {
		c.slowConsumer()
	}
	return served
}

// maxDensity bounds a density request; anything above every tier maps to
// the highest anyway.
const maxDensity = auth.MaxDensity

// densityParam reads the /ws parameter density: absent (noCap), "all"
// (0) or a number of messages a second.
func densityParam(v string) (int, error) {
	switch v {
	case "":
		return noCap, nil
	case "all":
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxDensity {
		return 0, danmaku.Errorf(danmaku.EINVALID, "density", "must be \"all\" or a number of messages a second between 0 and %d", maxDensity)
	}
	return n, nil
}

// parseUID is the numeric user id of a viewer's uid, which messages carry.
func parseUID(user string) (int64, bool) {
	if user == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(user, 10, 64)
	return n, err == nil
}
