package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
)

// record is one consumed Kafka record, decoded.
type record struct {
	env  danmaku.Envelope
	err  error // the value could not be decoded
	part int
	off  int64
	gen  int64 // the member's generation it was fetched in (consumer.seq)
}

// consumer is the job's member of the Kafka consumer group. kafka-go's
// ConsumerGroup keeps the membership (joins, heartbeats, generations); for
// each generation one fetch loop per partition leader sends fetch requests
// that cover all of the member's partitions on that broker and hands the
// decoded records of each response to the scheduler as one slice. It
// commits the positions the scheduler hands it, on its own goroutine so
// that a slow broker never stalls deliveries; commits go to the current
// generation and only ever name positions of finished records.
type consumer struct {
	cfg  Config
	kcfg config.Kafka
	log  *zap.Logger
	m    *metrics

	group     *kafka.ConsumerGroup // set by open
	transport *kafka.Transport
	client    *kafka.Client
	gen       atomic.Pointer[kafka.Generation] // the latest generation: commits go to it (set under mu)
	// seq numbers this member's generations (it moves on when one starts
	// and when it ends): records carry the value their generation started
	// with, and the scheduler drops those of generations that ended (see
	// scheduler.newGeneration). Kafka's generation ids start over with the
	// group's state; seq does not.
	seq   atomic.Int64
	parts atomic.Pointer[[]*partition] // the partitions it fetches, for lag
	out   chan []record                // one slice per fetch response; closed when fetch returns
	// abandoned is set by a crash: nothing more is committed.
	abandoned atomic.Bool

	mu       sync.Mutex
	toCommit map[int]int64 // partition -> next offset to commit
	wake     chan struct{} // a commit is queued; closed for the last one
	// finishing is set when wake is closed (finishCommits).
	finishing bool
	// from is, per partition of the current generation, the offset the
	// group had committed when it was assigned: commits at or below it
	// are not sent, and partitions not in it are another member's.
	from map[int]int64
	// held is, per partition of the current generation, the offset the
	// group holds for it as far as this member knows: from, the start of
	// the log where the group had none, then each accepted commit. A
	// commit of it changes nothing, so vouch sends one to prove the
	// membership.
	held map[int]int64

	// commitMu lets one commit request out at a time (commitQueued,
	// vouch): a proof never overtakes a commit that moved a partition on.
	commitMu sync.Mutex
	// vouched is when this member last had proof that it still belonged
	// to its generation: when an accepted commit was sent, as time since
	// clock (monotonic); 0 when it has none since the generation began.
	vouched atomic.Int64
	clock   time.Time
}

func newConsumer(cfg Config, kcfg config.Kafka, log *zap.Logger, m *metrics) *consumer {
	return &consumer{cfg: cfg, kcfg: kcfg, log: log, m: m,
		out: make(chan []record, 4), toCommit: map[int]int64{}, wake: make(chan struct{}, 1),
		from: map[int]int64{}, held: map[int]int64{}, clock: time.Now()}
}

// open creates the group member, which joins the group in the background;
// records arrive once partitions are assigned.
func (c *consumer) open() error {
	c.transport = &kafka.Transport{MetadataTTL: metadataTTL, ClientID: "danmaku-job"}
	c.client = &kafka.Client{Addr: kafka.TCP(c.kcfg.Brokers...), Transport: c.transport}
	g, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                c.kcfg.Group,
		Brokers:           c.kcfg.Brokers,
		Topics:            []string{c.kcfg.Topic},
		HeartbeatInterval: c.cfg.HeartbeatInterval,
		SessionTimeout:    c.cfg.SessionTimeout,
		RebalanceTimeout:  c.cfg.RebalanceTimeout,
		StartOffset:       kafka.FirstOffset,
		Timeout:           c.cfg.CommitTimeout,
		ErrorLogger:       kafka.LoggerFunc(c.log.Sugar().Debugf),
		Logger:            groupLogger(c.log),
	})
	if err != nil {
		return fmt.Errorf("job: consumer group: %w", err)
	}
	c.group = g
	return nil
}

// metadataTTL is how often the transport rereads the cluster's metadata,
// so a moved partition leader is found within about this long.
const metadataTTL = 2 * time.Second

// lag is how far behind the end of its partitions this member is, as the
// last fetch response of each partition reported it.
func (c *consumer) lag() float64 {
	p := c.parts.Load()
	if p == nil {
		return 0
	}
	var n int64
	for _, part := range *p {
		n += part.lag.Load()
	}
	return float64(n)
}

// assigned returns the partitions this member fetches now.
func (c *consumer) assigned() []int {
	p := c.parts.Load()
	if p == nil {
		return nil
	}
	ids := make([]int, len(*p))
	for i, part := range *p {
		ids[i] = int(part.id)
	}
	return ids
}

// fetch consumes, one generation of the group after the other, until ctx
// ends. A broker that is down makes joining and fetching fail; both are
// retried with backoff, never given up.
func (c *consumer) fetch(ctx context.Context) {
	defer close(c.out)
	for {
		gen, err := c.group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || c.abandoned.Load() || errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			// The group backs off by itself before it tries again.
			c.log.Warn("kafka consumer group join failed; retrying", zap.Error(err))
			continue
		}
		c.consumeGeneration(ctx, gen)
		if ctx.Err() != nil {
			return
		}
	}
}

// consumeGeneration fetches the partitions gen assigned, from their
// committed positions, until the generation or ctx ends.
func (c *consumer) consumeGeneration(ctx context.Context, gen *kafka.Generation) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The generation ends with a rebalance (or when the group is closed).
	// Its end makes what was fetched in it stale at once (seq), before the
	// member joins the next one: a member that comes back from a pause
	// delivers none of it meanwhile.
	gen.Start(func(g context.Context) { <-g.Done(); c.seq.Add(1); cancel() })

	assigned := gen.Assignments[c.kcfg.Topic]
	seq := c.seq.Add(1)
	starts := c.resumeAt(gen, assigned)
	parts := make([]*partition, 0, len(assigned))
	ids := make([]int, 0, len(assigned))
	for _, a := range assigned {
		parts = append(parts, &partition{id: int32(a.ID), next: starts[a.ID], sent: starts[a.ID], gen: seq})
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	c.parts.Store(&parts)
	c.log.Info("kafka partitions assigned", zap.Int32("generation", gen.ID), zap.Ints("partitions", ids))
	backoff := c.cfg.RetryMin
	for ctx.Err() == nil {
		if len(parts) == 0 {
			<-ctx.Done()
			return
		}
		err := c.fetchPartitions(ctx, parts)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("kafka fetch failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(backoff*2, c.cfg.RetryMax)
	}
}

// resumeAt returns where each partition of a new generation is fetched
// from: the group's committed offset, or past it the offset this member
// queued to commit in an earlier generation and could not (the broker was
// away, the generation ended). The records below that offset were
// finished here: fetching them again would deliver them again, and when
// Redis lost their claims meanwhile (a restart) they would get new
// positions and reach every viewer a second time; the offset stays queued
// and is committed in this generation. A partition the group has no
// commit for (a log that started over) starts at its committed offset,
// and its queued commit is dropped. So are queued commits of partitions
// this generation did not assign, or at or below the group's committed
// offset: sent now, they would move another member's position back.
func (c *consumer) resumeAt(gen *kafka.Generation, assigned []kafka.PartitionAssignment) map[int]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Store(gen)
	c.vouched.Store(0)
	starts := make(map[int]int64, len(assigned))
	c.from = make(map[int]int64, len(assigned))
	c.held = make(map[int]int64, len(assigned))
	for _, a := range assigned {
		starts[a.ID], c.from[a.ID], c.held[a.ID] = a.Offset, a.Offset, a.Offset
		if off, ok := c.toCommit[a.ID]; ok && a.Offset >= 0 && off > a.Offset {
			starts[a.ID] = off
		}
	}
	c.dropUnsendable(c.toCommit, true)
	if len(c.toCommit) > 0 && !c.finishing {
		select { // commit them now, not with the next finished record
		case c.wake <- struct{}{}:
		default:
		}
	}
	return starts
}

// dropUnsendable removes from pending the commits the current generation
// must not send: of partitions it did not assign, or at or below the
// offset the group had committed when it assigned them. Commits carried
// over from an earlier generation are dropped too where the group has no
// commit (a log that started over: their offsets belong to the old one).
// c.mu is held.
func (c *consumer) dropUnsendable(pending map[int]int64, carried bool) {
	for p, off := range pending {
		committed, ok := c.from[p]
		if !ok || off <= committed || carried && committed < 0 {
			delete(pending, p)
		}
	}
}

// queue merges partition positions into the set the commit loop sends
// next. It never blocks.
func (c *consumer) queue(positions map[int]int64) {
	if len(positions) == 0 {
		return
	}
	c.requeue(positions)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// requeue merges positions into the next commit without waking the loop.
func (c *consumer) requeue(positions map[int]int64) {
	c.mu.Lock()
	for p, off := range positions {
		if off > c.toCommit[p] {
			c.toCommit[p] = off
		}
	}
	c.mu.Unlock()
}

// commitLoop commits queued positions until finishCommits, then commits
// what is left once more and returns.
func (c *consumer) commitLoop() {
	for range c.wake {
		c.commitQueued()
	}
	c.commitQueued()
}

// finishCommits makes commitLoop send the last queued positions and
// return. queue must not be called afterwards.
func (c *consumer) finishCommits() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finishing = true
	close(c.wake)
}

func (c *consumer) commitQueued() {
	if c.abandoned.Load() {
		return
	}
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.mu.Lock()
	pending := c.toCommit
	c.toCommit = map[int]int64{}
	c.dropUnsendable(pending, false)
	gen := c.gen.Load()
	c.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	if err := c.commit(gen, pending); err != nil {
		// Sent again with the next commit. After a rebalance the partition
		// may belong to another member, which then redelivers from its last
		// commit: dedup covers that.
		c.requeue(pending)
		c.m.commitErrors.Inc()
		c.log.Debug("commit failed", zap.Error(err))
	}
}

// commit sends positions to gen and notes what the group holds after it
// and, when it was accepted, that the member belonged to gen when it was
// sent. c.commitMu is held.
func (c *consumer) commit(gen *kafka.Generation, positions map[int]int64) error {
	if gen == nil {
		return errors.New("no generation of the group yet")
	}
	sent := time.Since(c.clock)
	// CommitOffsets is bounded by the group's timeout (CommitTimeout).
	if err := gen.CommitOffsets(map[string]map[int]int64{c.kcfg.Topic: positions}); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() == gen {
		for p, off := range positions {
			c.held[p] = max(c.held[p], off)
		}
		c.vouched.Store(int64(max(sent, 1)))
	}
	return nil
}

// errGenerationEnded refuses a delivery of records fetched in a
// generation of the group that has ended.
var errGenerationEnded = errors.New("the generation its records were fetched in has ended")

// vouch returns nil when this member belongs to generation seq (its
// consumer.seq) as of less than maxAge ago: then another member that took
// its partitions over did so less than maxAge ago, and the claims it made
// in Redis for what it delivered (ProcessedTTL) are all still there.
// Without such proof, for instance after the process was paused for
// longer than a session, it commits the position the group already holds
// for one of its partitions: the coordinator accepts that only from a
// member of the current generation. A delivery that began without it
// could find those claims expired and deliver their messages again, with
// new positions.
func (c *consumer) vouch(seq int64, maxAge time.Duration) error {
	if c.seq.Load() != seq {
		return errGenerationEnded
	}
	if c.isVouched(maxAge) {
		return nil
	}
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if c.isVouched(maxAge) { // another delivery's proof, or a commit
		return nil
	}
	c.mu.Lock()
	gen := c.gen.Load()
	p, off := -1, int64(-1)
	for id, o := range c.held {
		if o >= 0 && (p < 0 || id < p) {
			p, off = id, o
		}
	}
	c.mu.Unlock()
	if c.seq.Load() != seq {
		return errGenerationEnded
	}
	if p < 0 {
		return errors.New("no partition position to prove the membership with yet")
	}
	c.m.proofs.Inc()
	return c.commit(gen, map[int]int64{p: off})
}

func (c *consumer) isVouched(maxAge time.Duration) bool {
	v := c.vouched.Load()
	return v > 0 && time.Since(c.clock)-time.Duration(v) < maxAge
}

// close leaves the group and closes the connections.
func (c *consumer) close() error {
	if c.group == nil {
		return nil
	}
	err := c.group.Close()
	c.transport.CloseIdleConnections()
	return err
}
