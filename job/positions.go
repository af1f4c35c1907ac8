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
// A batch counts as delivered only once its record is acknowledged, and a
// pushed batch owes only its record: a failed write is retried where it
// failed, with backoff, never by delivering the batch again. A delivery
// again would run the room's guards again, and when Redis lost the room's
// timeline meanwhile (a restart, a failover) its messages would get new
// positions in a new epoch and every viewer would receive them twice. A
// job killed between the push and the record leaves the batch's offsets
// uncommitted, so the next member delivers it at the same positions (the
// claims hold them) and publishes the record. Readers therefore see a
// position at least once, and may see it twice.
type positions struct {
	topic    string
	kafka    config.Kafka
	producer *kafkax.Producer
	timeout  time.Duration
	// retryMin and retryMax bound the backoff between failed writes.
	retryMin, retryMax time.Duration
	errors             prometheus.Counter
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
		retryMin: cfg.RetryMin, retryMax: cfg.RetryMax,
		producer: kafkax.NewProducer(k.Brokers, cfg.PositionsTopic, kafkax.ProducerConfig{}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_positions_errors_total",
			Help: "Failed writes of positions records (job.positions_topic); each is written again until acknowledged."})}
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
// positions follow each other, again and again until the record is
// acknowledged, and reports whether it was: false only when ctx ended (a
// crash or an abandoned drain), which leaves the batch to the next member.
func (p *positions) publish(ctx context.Context, room, epoch string, msgs []danmaku.Message) bool {
	if p == nil || len(msgs) == 0 {
		return true
	}
	rec := danmaku.Positions{Room: room, Epoch: epoch, Pos: msgs[0].Pos, IDs: make([]string, len(msgs))}
	for i, m := range msgs {
		rec.IDs[i] = m.ID
	}
	b, err := danmaku.MarshalPositions(rec)
	if err != nil {
		p.errors.Inc()
		return false
	}
	wait := p.retryMin
	for !p.write(ctx, room, b) {
		p.errors.Inc()
		p.ensure(ctx)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, p.retryMax)
	}
	return true
}

// write writes one record, bounded by the push timeout.
func (p *positions) write(ctx context.Context, room string, b []byte) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
	defer cancel()
	return p.producer.Write(wctx, []byte(room), time.Now(), b) == nil
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
