package job

import (
	"context"
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
}

// consumer is the job's member of the Kafka consumer group. It fetches and
// decodes records for the scheduler and commits the positions the
// scheduler hands it, on its own goroutine so that a slow broker never
// stalls deliveries. Commits are explicit: kafka-go's own commit interval
// is off.
type consumer struct {
	cfg  Config
	kcfg config.Kafka
	log  *zap.Logger
	m    *metrics

	reader atomic.Pointer[kafka.Reader] // set by open
	out    chan record                  // closed when fetch returns
	// abandoned is set by a crash: nothing more is committed.
	abandoned atomic.Bool

	mu       sync.Mutex
	toCommit map[int]int64 // partition -> next offset to commit
	wake     chan struct{} // a commit is queued; closed for the last one
}

func newConsumer(cfg Config, kcfg config.Kafka, log *zap.Logger, m *metrics) *consumer {
	return &consumer{cfg: cfg, kcfg: kcfg, log: log, m: m,
		out: make(chan record, 256), toCommit: map[int]int64{}, wake: make(chan struct{}, 1)}
}

// open creates the group reader, which joins the group in the background;
// records arrive once partitions are assigned.
func (c *consumer) open() {
	c.reader.Store(kafka.NewReader(kafka.ReaderConfig{
		Brokers:           c.kcfg.Brokers,
		GroupID:           c.kcfg.Group,
		Topic:             c.kcfg.Topic,
		MinBytes:          1,
		MaxBytes:          8 << 20,
		MaxWait:           c.cfg.MaxWait,
		CommitInterval:    0, // commits are explicit and synchronous
		HeartbeatInterval: c.cfg.HeartbeatInterval,
		SessionTimeout:    c.cfg.SessionTimeout,
		RebalanceTimeout:  c.cfg.RebalanceTimeout,
		StartOffset:       kafka.FirstOffset,
		MaxAttempts:       3,
		ErrorLogger:       kafka.LoggerFunc(c.log.Sugar().Debugf),
		Logger:            groupLogger(c.log),
	}))
}

// lag is the reader's view of how far behind the assigned partitions it is.
func (c *consumer) lag() float64 {
	if r := c.reader.Load(); r != nil {
		return float64(r.Stats().Lag)
	}
	return 0
}

// fetch reads records into out until ctx ends. A broker that is down makes
// FetchMessage fail; fetch retries with backoff.
func (c *consumer) fetch(ctx context.Context) {
	defer close(c.out)
	r := c.reader.Load()
	backoff := c.cfg.RetryMin
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil || c.abandoned.Load() {
				return
			}
			c.log.Warn("kafka fetch failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(backoff*2, c.cfg.RetryMax)
			continue
		}
		backoff = c.cfg.RetryMin
		env, derr := danmaku.UnmarshalEnvelope(m.Value)
		select {
		case c.out <- record{env: env, err: derr, part: m.Partition, off: m.Offset}:
		case <-ctx.Done():
			return
		}
	}
}

// queue merges partition positions into the set the commit loop sends
// next. It never blocks.
func (c *consumer) queue(positions map[int]int64) {
	if len(positions) == 0 {
		return
	}
	c.mu.Lock()
	for p, off := range positions {
		if off > c.toCommit[p] {
			c.toCommit[p] = off
		}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
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
func (c *consumer) finishCommits() { close(c.wake) }

func (c *consumer) commitQueued() {
	if c.abandoned.Load() {
		return
	}
	c.mu.Lock()
	pending := c.toCommit
	c.toCommit = map[int]int64{}
	c.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	msgs := make([]kafka.Message, 0, len(pending))
	for p, next := range pending {
		// kafka-go commits the given offset + 1.
		msgs = append(msgs, kafka.Message{Topic: c.kcfg.Topic, Partition: p, Offset: next - 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CommitTimeout)
	defer cancel()
	if err := c.reader.Load().CommitMessages(ctx, msgs...); err != nil {
		// After a rebalance the partition may belong to another member, which
		// then redelivers from its last commit: dedup covers that.
		c.m.commitErrors.Inc()
		c.log.Debug("commit failed", zap.Error(err))
	}
}

// close leaves the group and closes the reader.
func (c *consumer) close() error {
	if r := c.reader.Load(); r != nil {
		return r.Close()
	}
	return nil
}
