package archive

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/kafkax"
)

// Timeline positions. job gives a comment its position when it delivers
// it, and then says so on the positions topic (danmaku.Positions); the
// archive reads that topic in the same consumer group as the room topic
// (partition N of both on one member: the topics have as many partitions
// and the same keys) and stores each comment with its position:
//
//   - A comment waits, uncommitted, for its position until PositionWait
//     after it was accepted and released (Msg.TS + HoldMs, by the
//     record's time); while job keeps up the position comes well before,
//     and the comment is written once, with it. The records of a
//     partition are written in order, so a waiting comment holds back the
//     records after it.
//   - A comment whose position did not come in time is written without,
//     and remembered (room.unpos) for retryWindow, also across restarts
//     (IDsSince): a position that comes later (job was down) is written
//     to its row.
//   - A positions record is committed only once every position it carries
//     is settled: written with its comment or to its row, or found to have
//     no comment to go with (the comment came before its position and was
//     not stored, or was stored too long ago). Until then a restart reads
//     it again; writing a position twice changes nothing.

// posKey names a message of a room.
type posKey struct{ room, id string }

// posRec is one positions record and how many of its positions are not
// settled yet.
type posRec struct {
	msg    kafka.Message
	readAt time.Time
	keys   []posKey
	left   int
}

type posEntry struct {
	pos   int64
	epoch string // the timeline epoch of pos
	rec   *posRec
}

// posBook holds the positions read and not yet settled, and the records
// they came in, per partition in offset order.
type posBook struct {
	entries map[posKey]posEntry
	recs    map[int][]*posRec
	// max bounds len(entries) (posMax): past it the oldest records'
	// positions are dropped.
	max int
	// fresh are the keys added since the last write: each is looked up
	// among the rows stored without a position.
	fresh []posKey
}

// posMax is how many positions the archive holds at most while they wait
// for their comments (a few hundred bytes each): a room topic far behind
// the positions topic would otherwise grow the book without bound. Past
// it the positions of the oldest records are dropped (their comments, if
// they come, are stored without, as when job was down).
const posMax = 100_000

func newPosBook() *posBook {
	return &posBook{entries: map[posKey]posEntry{}, recs: map[int][]*posRec{}, max: posMax}
}

// add takes in a positions record; a position given again (a batch
// delivered twice) replaces the one held. It returns how many positions
// held were dropped to stay within b.max.
func (b *posBook) add(m kafka.Message, p danmaku.Positions) int {
	rec := &posRec{msg: m, readAt: time.Now()}
	for i, id := range p.IDs {
		k := posKey{p.Room, id}
		if old, ok := b.entries[k]; ok {
			old.rec.left--
		}
		b.entries[k] = posEntry{pos: p.Pos + int64(i), epoch: p.Epoch, rec: rec}
		rec.keys = append(rec.keys, k)
		rec.left++
		b.fresh = append(b.fresh, k)
	}
	b.recs[m.Partition] = append(b.recs[m.Partition], rec)
	n := 0
	for len(b.entries) > b.max {
		old := b.oldest()
		if old == nil || old == rec {
			break
		}
		n += b.drop(old)
	}
	return n
}

// oldest returns the record read first among those with positions held.
func (b *posBook) oldest() *posRec {
	var first *posRec
	for _, recs := range b.recs {
		for _, rec := range recs {
			if rec.left > 0 {
				if first == nil || rec.readAt.Before(first.readAt) {
					first = rec
				}
				break
			}
		}
	}
	return first
}

// drop settles the positions held of rec and returns how many.
func (b *posBook) drop(rec *posRec) int {
	n := 0
	for _, k := range rec.keys {
		if e, ok := b.entries[k]; ok && e.rec == rec {
			b.settle(k)
			n++
		}
	}
	rec.left = 0
	return n
}

// get returns the position of id of room and its epoch, if read.
func (b *posBook) get(room, id string) (int64, string, bool) {
	e, ok := b.entries[posKey{room, id}]
	return e.pos, e.epoch, ok
}

// settle forgets the position of k: it was written, or has nothing to go
// with.
func (b *posBook) settle(k posKey) {
	if e, ok := b.entries[k]; ok {
		delete(b.entries, k)
		e.rec.left--
	}
}

// forget drops what partition part brought: its records come again
// (another member had the partition meanwhile).
func (b *posBook) forget(part int) {
	for _, rec := range b.recs[part] {
		for _, k := range rec.keys {
			if e, ok := b.entries[k]; ok && e.rec == rec {
				delete(b.entries, k)
			}
		}
	}
	delete(b.recs, part)
}

// expire settles the positions of partition part read before readBefore
// or written by job before writtenBefore (the room records of the
// partition up to then were all applied: their comments came already),
// and returns how many.
func (b *posBook) expire(part int, readBefore, writtenBefore time.Time) int {
	n := 0
	for _, rec := range b.recs[part] {
		if rec.left > 0 && (rec.readAt.Before(readBefore) || rec.msg.Time.Before(writtenBefore)) {
			n += b.drop(rec)
		}
	}
	return n
}

// commits returns, per partition, the last record up to which every
// record is settled, and lets those records go.
func (b *posBook) commits() []kafka.Message {
	var out []kafka.Message
	for part, recs := range b.recs {
		n := 0
		for n < len(recs) && recs[n].left <= 0 {
			n++
		}
		if n > 0 {
			out = append(out, recs[n-1].msg)
			b.recs[part] = recs[n:]
		}
	}
	return out
}

// topicPart names a partition of one of the archive's topics.
type topicPart struct {
	topic string
	part  int
}

// Settling positions that found no comment: posSkew allows for the
// clocks of logic (the room records' times) and job (the positions
// records') to differ; posLinger bounds how long any position is held.
const (
	posSkew   = 10 * time.Second
	posLinger = 10 * time.Minute
)

// ensurePositions creates the positions topic like job does, retrying
// until ctx ends, and warns when its partitions are not the room topic's
// (a room's positions would then reach another member).
func (a *Archive) ensurePositions(ctx context.Context) error {
	t := kafkax.Topic{Name: a.cfg.PositionsTopic, Replication: a.kcfg.Replication}
	for {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := kafkax.EnsureTopicLike(tctx, a.kcfg.Brokers, a.kcfg.Topic, t)
		var n, want int
		if err == nil {
			n, err = kafkax.Partitions(tctx, a.kcfg.Brokers, t.Name)
			want, _ = kafkax.Partitions(tctx, a.kcfg.Brokers, a.kcfg.Topic)
		}
		cancel()
		if err == nil {
			if n != want {
				a.log.Error("the positions topic's partitions differ from the room topic's: positions of rooms may be missed",
					zap.String("topic", t.Name), zap.Int("partitions", n), zap.Int("room_partitions", want))
			}
			return nil
		}
		a.log.Warn("positions topic not ready, retrying", zap.String("topic", t.Name), zap.Error(err))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// take files the records fetched: positions into the book, room records
// into their partition's queue.
func (a *Archive) take(msgs []kafka.Message) {
	for _, m := range msgs {
		tp := topicPart{m.Topic, m.Partition}
		if want, ok := a.next[tp]; ok && want != m.Offset {
			// Another member had the partition meanwhile, or records
			// come again: what this process holds of it may be stale.
			if m.Topic == a.kcfg.Topic {
				a.rooms = map[string]*room{}
				delete(a.queue, m.Partition)
			} else {
				a.book.forget(m.Partition)
			}
		}
		a.next[tp] = m.Offset + 1
		if m.Topic != a.kcfg.Topic {
			p, err := danmaku.UnmarshalPositions(m.Value)
			if err != nil {
				a.m.records.WithLabelValues("invalid").Inc()
				p = danmaku.Positions{} // nothing to hold: committed with the others
			}
			if n := a.book.add(m, p); n > 0 {
				a.m.positions.WithLabelValues("dropped").Add(float64(n))
			}
			continue
		}
		env, err := danmaku.UnmarshalEnvelope(m.Value)
		a.queue[m.Partition] = append(a.queue[m.Partition], record{m: m, part: int32(m.Partition), off: m.Offset, env: env, err: err})
	}
}

// ready takes from the queues the room records that may be written now,
// in partition order, at most BatchSize.
func (a *Archive) ready(now time.Time) []record {
	var out []record
	for part, q := range a.queue {
		n := 0
		for n < len(q) && len(out)+n < a.cfg.BatchSize && a.isReady(q[n], now) {
			n++
		}
		out = append(out, q[:n]...)
		if n == len(q) {
			delete(a.queue, part)
		} else {
			a.queue[part] = q[n:]
		}
	}
	return out
}

// isReady reports whether rec may be written: anything but a comment at
// once, a comment once its position was read or it waited long enough.
func (a *Archive) isReady(rec record, now time.Time) bool {
	env := rec.env
	if a.book == nil || rec.err != nil || env.Event != nil || env.Notice != nil || env.Canary != nil || !visible(env) {
		return true
	}
	if _, _, ok := a.book.get(env.Room, env.Msg.ID); ok {
		return true
	}
	return !now.Before(a.due(rec))
}

// due is when a comment stops waiting for its position: PositionWait
// after job would have released it.
func (a *Archive) due(rec record) time.Time {
	return rec.m.Time.Add(time.Duration(rec.env.HoldMs)*time.Millisecond + a.cfg.PositionWait)
}

// nextDue returns when the first waiting comment stops waiting.
func (a *Archive) nextDue() (time.Time, bool) {
	var first time.Time
	for _, q := range a.queue {
		if d := a.due(q[0]); first.IsZero() || d.Before(first) {
			first = d
		}
	}
	return first, !first.IsZero()
}

// queued returns how many room records wait.
func (a *Archive) queued() int {
	n := 0
	for _, q := range a.queue {
		n += len(q)
	}
	return n
}

// written does what a successful write of p (made of recs) settles.
func (a *Archive) written(p *placer, recs []record) {
	for _, f := range p.after {
		f()
	}
	if a.book == nil {
		return
	}
	for _, k := range p.settled {
		a.book.settle(k)
	}
	a.book.fresh = nil
	a.m.positions.WithLabelValues("with_comment").Add(float64(p.withComment))
	a.m.positions.WithLabelValues("late").Add(float64(p.lateOnes))
	a.m.positions.WithLabelValues("missing").Add(float64(p.missing))
	for _, rec := range recs {
		if part := rec.m.Partition; rec.m.Time.After(a.applied[part]) {
			a.applied[part] = rec.m.Time
		}
	}
	now := time.Now()
	n := 0
	for part := range a.book.recs {
		n += a.book.expire(part, now.Add(-posLinger), a.applied[part].Add(-posSkew))
	}
	a.m.positions.WithLabelValues("unmatched").Add(float64(n))
}

// settleIdle settles, once every record was read and written, the
// positions that found no comment, and commits them.
func (a *Archive) settleIdle(ctx context.Context) {
	if a.book == nil || a.queued() > 0 || len(a.book.fresh) > 0 {
		return
	}
	n := 0
	for part := range a.book.recs {
		n += a.book.expire(part, time.Now().Add(-idleAfter), time.Time{})
	}
	a.m.positions.WithLabelValues("unmatched").Add(float64(n))
	a.commit(ctx, nil)
}
