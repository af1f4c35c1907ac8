// Package archive is the archive role: a Kafka consumer group of its own
// on the room topic that writes every accepted comment, with its stream
// and its video offset, to the archive's database (vodstore), for replay
// over the stream's recording.
//
// Invariants:
//   - Records are applied in partition order, in batches; a batch is one
//     database transaction, and its offsets are committed only after it
//     was written. A failed write is retried (consumption pauses), never
//     skipped.
//   - A comment belongs to the stream whose records [StartOff, EndOff) of
//     the room's partition hold it: the stream events (from the admin
//     API) mark those bounds, so a redelivered record lands in the stream
//     it landed in before, and the database's key (stream, offset, id)
//     keeps it from being stored twice. A client's retry (same id, later
//     time) is caught by the ids remembered for retryWindow, which a
//     room's load reads from the database: what was stored judges, also
//     across restarts.
//   - Deletions become tombstones of their room: whatever order the
//     comment and its deletion are written in, reads never return it.
//   - Records of a partition are expected one offset after the other; a
//     jump (a rebalance gave the partition to another member and back)
//     makes the archive forget what it knew of that partition's rooms and
//     read their streams from the database again.
package archive

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/vodstore"
)

// Archive consumes the room topic into a vodstore.Store.
type Archive struct {
	cfg   Config
	kcfg  config.Kafka
	store vodstore.Store
	log   *zap.Logger
	m     *metrics

	reader *kafka.Reader
	rooms  map[string]*room
	// next is, per topic and partition, the offset expected after the
	// last record read; lag the room partition's records not yet written.
	next map[topicPart]int64
	lag  sync.Map // int32 -> int64
	// queue holds, per partition, the room records read and not yet
	// written: comments wait there for their positions (positions.go).
	queue map[int][]record
	// book holds the positions read (nil: positions off); applied the
	// Kafka time of each partition's last room record written.
	book    *posBook
	applied map[int]time.Time

	cancel    context.CancelFunc
	done      chan struct{}
	running   atomic.Bool
	lastPrune time.Time
}

// Deps are what New needs besides the configuration.
type Deps struct {
	Kafka      config.Kafka
	Store      vodstore.Store
	Log        *zap.Logger
	Registerer prometheus.Registerer
}

// New returns an archive that does nothing until Start.
func New(cfg Config, d Deps) (*Archive, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Archive{cfg: cfg, kcfg: d.Kafka, store: d.Store, log: d.Log, rooms: map[string]*room{},
		next: map[topicPart]int64{}, queue: map[int][]record{}, applied: map[int]time.Time{}, done: make(chan struct{})}
	if cfg.PositionsTopic != "" {
		a.book = newPosBook()
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	a.m = newMetrics(d.Registerer, a.lagSum)
	return a, nil
}

// Start joins the consumer group and consumes in the background until
// Shutdown.
func (a *Archive) Start(ctx context.Context) error {
	topics := []string{a.kcfg.Topic}
	if a.book != nil {
		if err := a.ensurePositions(ctx); err != nil {
			return err
		}
		topics = append(topics, a.cfg.PositionsTopic)
	}
	a.reader = kafka.NewReader(kafka.ReaderConfig{
		Brokers:     a.kcfg.Brokers,
		GroupID:     a.cfg.Group,
		GroupTopics: topics,
		// Partition N of the room topic and of the positions topic on
		// the same member: the range balancer gives each member the same
		// ranges of topics of as many partitions.
		GroupBalancers: []kafka.GroupBalancer{kafka.RangeGroupBalancer{}},
		// Each partition of both topics is fetched on its own: a fetch
		// waits for 64 KB or MaxWait, not for the next record, so a busy
		// archive sends a few fetches a second per partition rather than
		// one per handful of records (their writes were about 6 % of
		// its CPU at 8,000 comments/s).
		MinBytes:          64 << 10,
		MaxBytes:          16 << 20,
		MaxWait:           100 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		CommitInterval:    0, // synchronous: committed when CommitMessages returns
		HeartbeatInterval: a.cfg.HeartbeatInterval,
		SessionTimeout:    a.cfg.SessionTimeout,
		RebalanceTimeout:  a.cfg.RebalanceTimeout,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    time.Second,
		ErrorLogger:       kafka.LoggerFunc(a.log.Sugar().Debugf),
	})
	ctx, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	a.running.Store(true)
	go a.run(ctx)
	return nil
}

// Ready reports whether the archive consumes and its database answers.
func (a *Archive) Ready(ctx context.Context) error {
	if !a.running.Load() {
		return danmaku.Unavailable("the archive's consumer has not started", nil)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := a.store.Streams(ctx, "-", 1); err != nil {
		return danmaku.Unavailable("the archive's database does not answer", err)
	}
	return nil
}

// Shutdown stops consuming after the batch in hand is written and
// committed (or ctx ends), and leaves the group.
func (a *Archive) Shutdown(ctx context.Context) error {
	if a.cancel == nil {
		return nil
	}
	a.cancel()
	select {
	case <-a.done:
	case <-ctx.Done():
		return errors.New("archive: shutdown timed out while a batch was being written")
	}
	return a.reader.Close()
}

// run is the consuming loop: fetch records, take in the positions, queue
// the room records, write those ready, commit.
func (a *Archive) run(ctx context.Context) {
	defer close(a.done)
	for ctx.Err() == nil {
		msgs := a.fetch(ctx)
		a.take(msgs)
		ready := a.ready(time.Now())
		if len(ready) == 0 && (a.book == nil || len(a.book.fresh) == 0) {
			if len(msgs) == 0 && a.queued() == 0 {
				a.idle(ctx)
			}
			continue
		}
		if !a.process(ctx, ready) {
			return // stopping before the batch was written: it is redelivered
		}
		a.commit(ctx, ready)
	}
}

// idleAfter is how long the loop waits for a first record before it
// runs its idle work.
const idleAfter = time.Second

// fetch returns the next batch: up to BatchSize records, gathered for at
// most BatchWait after the first; none after idleAfter without a record.
func (a *Archive) fetch(ctx context.Context) []kafka.Message {
	deadline := time.Now().Add(idleAfter)
	if due, ok := a.nextDue(); ok && due.Before(deadline) {
		deadline = due
		if soon := time.Now().Add(time.Millisecond); deadline.Before(soon) {
			deadline = soon
		}
	}
	// One context while waiting for the first record, one for the rest
	// (not one per record: each holds a timer).
	first, cancel := context.WithDeadline(ctx, deadline)
	m, ok := a.fetchOne(ctx, first)
	cancel()
	if !ok {
		return nil
	}
	msgs := []kafka.Message{m}
	rest, cancel := context.WithTimeout(ctx, a.cfg.BatchWait)
	defer cancel()
	for len(msgs) < a.cfg.BatchSize {
		m, ok := a.fetchOne(ctx, rest)
		if !ok {
			break
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// fetchOne returns the next record, or false when wait ended first or
// the fetch failed (after a pause unless ctx ended).
func (a *Archive) fetchOne(ctx, wait context.Context) (kafka.Message, bool) {
	m, err := a.reader.FetchMessage(wait)
	if err != nil {
		if ctx.Err() == nil && wait.Err() == nil {
			a.log.Debug("kafka fetch failed; retrying", zap.Error(err))
			a.m.fetchErrors.Inc()
			sleep(ctx, 200*time.Millisecond)
		}
		return m, false
	}
	return m, true
}

// process applies recs and writes the batch, with the positions read
// since the last write, retrying until it is written; false when ctx
// ended first.
func (a *Archive) process(ctx context.Context, recs []record) bool {
	var rooms []string
	oldest := time.Now()
	for _, rec := range recs {
		if rec.err == nil && rec.env.Notice == nil && rec.env.Canary == nil {
			rooms = append(rooms, rec.env.Room)
		}
		if rec.m.Time.Before(oldest) {
			oldest = rec.m.Time
		}
	}
	if a.book != nil {
		for _, k := range a.book.fresh {
			rooms = append(rooms, k.room)
		}
	}
	for {
		err := a.load(ctx, rooms, oldest)
		if err == nil {
			p, aerr := a.apply(ctx, recs)
			if err = aerr; err == nil {
				if err = a.write(ctx, &p.batch); err == nil {
					a.written(p, recs)
					return true
				}
			}
		}
		if ctx.Err() != nil {
			return false
		}
		a.m.writeErrors.Inc()
		a.log.Warn("archive write failed; retrying the batch", zap.Int("records", len(recs)), zap.Error(err))
		// What the failed attempt placed is read again from the database.
		for _, id := range rooms {
			delete(a.rooms, id)
		}
		sleep(ctx, time.Second)
	}
}

// load reads the streams of the rooms not known yet that may hold
// records since oldest.
func (a *Archive) load(ctx context.Context, rooms []string, oldest time.Time) error {
	var todo []string
	seen := map[string]bool{}
	for _, id := range rooms {
		if a.rooms[id] == nil && !seen[id] {
			seen[id] = true
			todo = append(todo, id)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.WriteTimeout)
	defer cancel()
	sts, err := a.store.Recent(ctx, todo, oldest.Add(-time.Minute).UnixMilli())
	if err != nil {
		return err
	}
	loaded := map[string]*room{}
	for _, id := range todo {
		loaded[id] = &room{}
	}
	for _, st := range sts {
		r := loaded[st.Room]
		r.streams = append(r.streams, st)
		// The ids stored in the retry window before these records.
		ids, err := a.store.IDsSince(ctx, st, oldest.Add(-retryWindow).UnixMilli()-st.Start)
		if err != nil {
			return err
		}
		for _, c := range ids {
			r.recent.add(c.ID, st.Start+c.Offset, st.Start+c.Offset)
			if c.Pos == 0 && a.book != nil {
				r.unpos.add(c.ID, st.Start+c.Offset, vodstore.Position{SID: st.SID, Offset: c.Offset, ID: c.ID})
			}
		}
	}
	maps.Copy(a.rooms, loaded)
	return nil
}

// apply places every record of the batch, and the positions read for
// comments stored before.
func (a *Archive) apply(ctx context.Context, recs []record) (*placer, error) {
	p := &placer{a: a}
	for _, rec := range recs {
		switch {
		case rec.err != nil:
			a.m.records.WithLabelValues("invalid").Inc()
		case rec.env.Notice != nil:
			a.m.records.WithLabelValues("notice").Inc()
		case rec.env.Canary != nil: // logic's delivery probe, for job and the comets
			a.m.records.WithLabelValues("canary").Inc()
		default:
			if err := p.apply(ctx, a.rooms[rec.env.Room], rec); err != nil {
				return nil, err
			}
		}
	}
	if a.book != nil {
		p.late()
	}
	return p, nil
}

// write stores b in one transaction.
func (a *Archive) write(ctx context.Context, b *vodstore.Batch) error {
	if b.Empty() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.WriteTimeout)
	defer cancel()
	start := time.Now()
	n, err := a.store.Write(ctx, b)
	if err != nil {
		return err
	}
	a.m.writeSeconds.Observe(time.Since(start).Seconds())
	a.m.stored.Add(float64(n))
	a.m.duplicates.Add(float64(len(b.Rows) - n))
	return nil
}

// commit commits the batch's last offset of each partition and the
// positions records settled, and updates the lag.
func (a *Archive) commit(ctx context.Context, recs []record) {
	last := map[int]kafka.Message{}
	for _, rec := range recs {
		last[rec.m.Partition] = rec.m
	}
	out := make([]kafka.Message, 0, len(last))
	for _, m := range last {
		out = append(out, m)
		a.lag.Store(int32(m.Partition), max(m.HighWaterMark-m.Offset-1, 0))
	}
	if a.book != nil {
		out = append(out, a.book.commits()...)
	}
	if len(out) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.WriteTimeout)
	defer cancel()
	if err := a.reader.CommitMessages(cctx, out...); err != nil {
		// Written but not committed: redelivered later, stored once.
		a.m.commitErrors.Inc()
		a.log.Warn("kafka commit failed", zap.Error(err))
	}
}

func (a *Archive) lagSum() float64 {
	var n int64
	a.lag.Range(func(_, v any) bool { n += v.(int64); return true })
	return float64(n)
}

// idle runs what waits for a quiet moment: ending auto streams after
// their silence, and retention.
func (a *Archive) idle(ctx context.Context) {
	a.lag.Range(func(k, _ any) bool { a.lag.Store(k, int64(0)); return true })
	a.settleIdle(ctx)
	if sil := a.cfg.AutoSilence; sil > 0 {
		a.endSilent(ctx, sil)
	}
	if a.cfg.Retention > 0 && time.Since(a.lastPrune) > time.Hour {
		a.lastPrune = time.Now()
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		n, err := a.store.Prune(pctx, time.Now().Add(-a.cfg.Retention))
		cancel()
		if err != nil {
			a.log.Warn("archive retention failed", zap.Error(err))
		} else if n > 0 {
			a.log.Info("archive retention removed streams", zap.Int("streams", n))
		}
	}
}

// endSilent ends the live auto streams whose last comment is older than
// sil; every record of their partition so far was applied, so the next
// offset is where they end.
func (a *Archive) endSilent(ctx context.Context, sil time.Duration) {
	p := &placer{a: a}
	now := time.Now().UnixMilli()
	for _, r := range a.rooms {
		if r == nil {
			continue
		}
		if live := r.live(); live != nil && live.Auto && r.lastTS > 0 && now-r.lastTS > sil.Milliseconds() {
			if next, ok := a.next[topicPart{a.kcfg.Topic, int(live.Part)}]; ok {
				p.end(r, r.lastTS+1, next)
			}
		}
	}
	if !p.batch.Empty() {
		if err := a.write(ctx, &p.batch); err != nil {
			a.log.Warn("ending silent streams failed", zap.Error(err))
			a.rooms = map[string]*room{} // read them again
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
