package archive

import (
	"context"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/vodstore"
)

// room is what the archive knows of one room: its recent streams, as the
// database had them when the room was loaded plus what this process did
// since. Only the consuming goroutine touches it.
type room struct {
	streams []vodstore.Stream // oldest first; at most one live, the last
	lastTS  int64             // the newest comment stored in the live stream
	// recent holds the ids of the room's comments of at least the last
	// retryWindow, with their time: a client's retry of a send is a
	// second record with the same id and a later time (another offset),
	// which the database's key (stream, offset, id) would not catch.
	// Loading a room fills it from the database, so a retry that comes
	// after a restart (or after a rebalance moved the partition) is
	// judged by what was stored.
	recent idWindow[int64]
	// unpos holds the comments of at least the last retryWindow stored
	// without a timeline position, by id, with their row: where a
	// position that comes later goes (positions.go). Loading a room
	// fills it from the database too.
	unpos idWindow[vodstore.Position]
}

// retryWindow is how long an id is remembered against client retries.
const retryWindow = 2 * time.Minute

// idWindow remembers values by id for at least retryWindow in two
// generations: when the newer one is retryWindow old, the older one is
// dropped. Each call is O(1), however many comments the room gets.
type idWindow[V any] struct {
	cur, prev map[string]V
	since     int64 // when cur began
}

func (w *idWindow[V]) get(id string) (V, bool) {
	if v, ok := w.cur[id]; ok {
		return v, true
	}
	v, ok := w.prev[id]
	return v, ok
}

// add remembers v for id, at time ts (Unix ms).
func (w *idWindow[V]) add(id string, ts int64, v V) {
	if w.cur == nil || ts-w.since > retryWindow.Milliseconds() {
		w.prev, w.cur, w.since = w.cur, map[string]V{}, ts
	}
	w.cur[id] = v
}

func (w *idWindow[V]) del(id string) {
	delete(w.cur, id)
	delete(w.prev, id)
}

// live returns the room's live stream, or nil.
func (r *room) live() *vodstore.Stream {
	if n := len(r.streams); n > 0 && r.streams[n-1].Live() {
		return &r.streams[n-1]
	}
	return nil
}

// holder returns the stream that the record at off of part belongs to,
// or nil.
func (r *room) holder(part int32, off int64) *vodstore.Stream {
	for i := len(r.streams) - 1; i >= 0; i-- {
		if r.streams[i].Holds(part, off) {
			return &r.streams[i]
		}
	}
	return nil
}

// behind reports whether the record at off of part comes before a
// stream the room knows: a record read again, which starts or ends
// nothing.
func (r *room) behind(part int32, off int64) bool {
	n := len(r.streams)
	return n > 0 && r.streams[n-1].Part == part && r.streams[n-1].StartOff > off
}

// retry reports whether id was stored with another time (a client's
// retry, not to be stored again), and remembers it otherwise. A record
// with the time of the one stored is a redelivery: the database's key
// finds it.
func (r *room) retry(id string, ts int64) bool {
	if first, ok := r.recent.get(id); ok {
		return first != ts
	}
	r.recent.add(id, ts, ts)
	return false
}

// record is one consumed record of the room topic.
type record struct {
	m    kafka.Message
	part int32
	off  int64
	env  danmaku.Envelope
	err  error
}

// placer turns the records of a batch into a vodstore.Batch: it places
// each comment in its stream, starts and ends streams, and turns
// moderation into tombstones.
type placer struct {
	a     *Archive
	batch vodstore.Batch
	// settled are the positions (positions.go) a successful write
	// settles: written, or with nothing to go with; after runs then.
	settled []posKey
	after   []func()
	// counts of danmaku_archive_positions_total, added once written.
	withComment, lateOnes, missing int
}

// apply adds rec to the batch. Starting a stream writes it at once (its
// key is needed for the comments after it); everything else waits for
// the batch's write.
func (p *placer) apply(ctx context.Context, r *room, rec record) error {
	env := rec.env
	if ev := env.Event; ev != nil {
		return p.event(ctx, r, rec, ev)
	}
	m := env.Msg
	if !visible(env) {
		p.a.m.records.WithLabelValues("not_visible").Inc()
		return nil
	}
	if sil := p.a.cfg.AutoSilence; sil > 0 && !r.behind(rec.part, rec.off) {
		if live := r.live(); live != nil && live.Auto && m.TS-r.lastTS > sil.Milliseconds() && r.lastTS > 0 {
			p.end(r, r.lastTS+1, rec.off)
		}
		if r.holder(rec.part, rec.off) == nil {
			id := "a" + strconv.FormatUint(hashOf(env.Room, m.ID), 36)
			if err := p.start(ctx, r, env.Room, id, m.TS, rec, true); err != nil {
				return err
			}
		}
	}
	pos, epoch, posed := p.position(env.Room, m.ID)
	st := r.holder(rec.part, rec.off)
	if st == nil {
		p.a.m.records.WithLabelValues("outside_stream").Inc()
		return nil
	}
	if r.retry(m.ID, m.TS) {
		p.a.m.records.WithLabelValues("retry").Inc()
		return nil
	}
	if st.Live() {
		r.lastTS = max(r.lastTS, m.TS)
	}
	// A held comment (a room's delay) was shown HoldMs after it was
	// accepted: it is replayed where viewers saw it.
	row := vodstore.Row{SID: st.SID, Comment: vodstore.Comment{
		ID: m.ID, UID: m.UID, Name: m.Name, Content: m.Content, Offset: vodstore.OffsetOf(m.TS+env.HoldMs, st.Start), Flags: flagsOf(m),
		Pos: pos, Epoch: epoch,
	}}
	p.batch.Rows = append(p.batch.Rows, row)
	p.placed(r, row, m.TS, posed)
	p.a.m.comments.Inc()
	return nil
}

// position returns the timeline position read for id of room, its
// epoch, and whether there is one; it is settled by this batch's write
// whatever becomes of the comment.
func (p *placer) position(room, id string) (int64, string, bool) {
	if p.a.book == nil {
		return 0, "", false
	}
	pos, epoch, ok := p.a.book.get(room, id)
	if ok {
		p.settled = append(p.settled, posKey{room, id})
	}
	return pos, epoch, ok
}

// placed notes what the write of row does to positions: a row stored
// without one is remembered; a row stored before without one (a
// redelivery after a restart) gets it.
func (p *placer) placed(r *room, row vodstore.Row, ts int64, posed bool) {
	if p.a.book == nil {
		return
	}
	id := row.ID
	if !posed {
		p.missing++
		at := vodstore.Position{SID: row.SID, Offset: row.Offset, ID: id}
		p.after = append(p.after, func() { r.unpos.add(id, ts, at) })
		return
	}
	p.withComment++
	if at, stored := r.unpos.get(id); stored {
		at.Pos, at.Epoch = row.Pos, row.Epoch
		p.batch.Positions = append(p.batch.Positions, at)
		p.after = append(p.after, func() { r.unpos.del(id) })
	}
}

// late adds the positions read since the last write whose comments were
// stored without one.
func (p *placer) late() {
	b := p.a.book
	for _, k := range b.fresh {
		r := p.a.rooms[k.room]
		if r == nil {
			continue
		}
		pos, epoch, ok := b.get(k.room, k.id)
		at, stored := r.unpos.get(k.id)
		if !ok || !stored {
			continue
		}
		at.Pos, at.Epoch = pos, epoch
		p.batch.Positions = append(p.batch.Positions, at)
		p.settled = append(p.settled, k)
		p.lateOnes++
		id := k.id
		p.after = append(p.after, func() { r.unpos.del(id) })
	}
}

// event applies a moderation or stream event in partition order.
func (p *placer) event(ctx context.Context, r *room, rec record, ev *danmaku.Event) error {
	p.a.m.records.WithLabelValues("event").Inc()
	if !ev.ForViewers() && r.behind(rec.part, rec.off) {
		return nil // a stream event read again
	}
	switch ev.Op {
	case danmaku.OpStreamStart:
		if st := r.holder(rec.part, rec.off); st != nil && st.ID == ev.Stream {
			return nil // a redelivered start
		}
		if live := r.live(); live != nil {
			p.end(r, ev.At, rec.off)
		}
		return p.start(ctx, r, ev.Room, ev.Stream, ev.At, rec, false)
	case danmaku.OpStreamEnd:
		if live := r.live(); live != nil && (ev.Stream == "" || ev.Stream == live.ID) {
			p.end(r, ev.At, rec.off)
		}
		return nil
	}
	for _, id := range hiddenIDs(ev) {
		p.batch.Tombstones = append(p.batch.Tombstones, vodstore.Tombstone{Room: ev.Room, ID: id})
	}
	return nil
}

// start creates a stream whose records begin after rec.
func (p *placer) start(ctx context.Context, r *room, roomID, id string, at int64, rec record, auto bool) error {
	wctx, cancel := context.WithTimeout(ctx, p.a.cfg.WriteTimeout)
	defer cancel()
	st, err := p.a.store.StartStream(wctx, vodstore.Stream{Room: roomID, ID: id, Start: at, Part: rec.part, StartOff: rec.off, EndOff: -1, Auto: auto})
	if err != nil {
		return err
	}
	if !st.Live() || st.Part != rec.part || st.StartOff != rec.off {
		// The room already had a stream of this id, elsewhere in the
		// partition: a start of an id used before starts nothing.
		p.a.m.records.WithLabelValues("stream_id_reused").Inc()
		return nil
	}
	r.streams = append(r.streams, st)
	r.lastTS = at
	p.a.m.streams.WithLabelValues("start").Inc()
	return nil
}

// end ends the room's live stream at the record at off (not its own).
func (p *placer) end(r *room, at, off int64) {
	live := r.live()
	live.End, live.EndOff = max(at, live.Start+1), off
	p.batch.Ends = append(p.batch.Ends, vodstore.End{SID: live.SID, End: live.End, EndOff: off})
	p.a.m.streams.WithLabelValues("end").Inc()
}

// visible reports whether a message is stored as a comment. Messages
// that viewers never see as sent (held for review, rejected, shadow
// hidden) are not: when the envelope says so, this is where they stay
// out.
func visible(env danmaku.Envelope) bool {
	return !env.Msg.Deleted
}

// hiddenIDs returns the messages an event hides from the replay: a
// deletion's ids. Events that hide messages (a shadow hide, a rejection
// of a held message) add their case here.
func hiddenIDs(ev *danmaku.Event) []string {
	if ev.Op == danmaku.OpDel {
		return ev.IDs
	}
	return nil
}

// flagsOf returns the comment flags of m: what Sample always keeps.
func flagsOf(m danmaku.Message) int16 {
	var f int16
	if m.Priority.High() {
		f |= vodstore.FlagHigh
	}
	if m.Mod {
		f |= vodstore.FlagModerator
	}
	return f
}

func hashOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return h.Sum64()
}
