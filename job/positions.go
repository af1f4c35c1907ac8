package job

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/kafkax"
)

// positions publishes, for every delivered room batch, the timeline
// positions its messages were given: one danmaku.Positions record on
// Config.PositionsTopic, keyed by the room, for the consumers of the room
// topic that keep comments with the position viewers saw (the archive).
//
// A batch counts as delivered only once its record is acknowledged: when
// the write fails the delivery is retried like a failed push, finds its
// messages positioned and pushes and publishes them again at the same
// positions. A job killed between the push and the record leaves the
// batch's offsets uncommitted, so the next member does the same. Readers
// therefore see a position at least once, and may see it twice.
type positions struct {
	topic    string
	kafka    config.Kafka
	producer *kafkax.Producer
	timeout  time.Duration
	errors   prometheus.Counter
	// ensured is when the topic was last ensured; only the workers that
	// failed a write touch it, one at a time (mu).
	mu      sync.Mutex
	ensured time.Time
}

// newPositions returns the publisher of cfg.PositionsTopic, or nil when
// it is empty (off).
func newPositions(cfg Config, k config.Kafka, reg prometheus.Registerer) *positions {
	if cfg.PositionsTopic == "" {
		return nil
	}
	p := &positions{topic: cfg.PositionsTopic, kafka: k, timeout: cfg.PushTimeout,
		producer: kafkax.NewProducer(k.Brokers, cfg.PositionsTopic, kafkax.ProducerConfig{}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_positions_errors_total",
			Help: "Positions records (job.positions_topic) that could not be written; the batch was delivered again."})}
	reg.MustRegister(p.errors)
	return p
}

// ensure creates the positions topic, with the room topic's partition
// count, when it is missing: at start and after a failed write, at most
// every ensureEvery (a broker that creates topics on first use would give
// it its default partition count).
func (p *positions) ensure(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.ensured) < ensureEvery {
		return nil
	}
	p.ensured = time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return kafkax.EnsureTopicLike(ctx, p.kafka.Brokers, p.kafka.Topic, kafkax.Topic{Name: p.topic, Replication: p.kafka.Replication})
}

const ensureEvery = 5 * time.Second

// publish writes the positions of msgs, a delivered batch of room whose
// positions follow each other, and reports whether it was acknowledged.
func (p *positions) publish(ctx context.Context, room, epoch string, msgs []danmaku.Message) bool {
	if p == nil || len(msgs) == 0 {
		return true
	}
	rec := danmaku.Positions{Room: room, Epoch: epoch, Pos: msgs[0].Pos, IDs: make([]string, len(msgs))}
	for i, m := range msgs {
		rec.IDs[i] = m.ID
	}
	b, err := danmaku.MarshalPositions(rec)
	if err == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
		err = p.producer.Write(wctx, []byte(room), time.Now(), b)
		cancel()
	}
	if err != nil {
		p.errors.Inc()
		p.ensure(ctx)
		return false
	}
	return true
}

// close flushes and closes the producer.
func (p *positions) close() error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.producer.Close(ctx); err != nil {
		return fmt.Errorf("positions producer: %w", err)
	}
	return nil
}
