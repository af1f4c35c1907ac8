package logic

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/telemetry"
)

// The delivery canary: every Config.CanaryInterval logic writes one canary
// record to each partition of the room topic, through the producer that
// carries the messages, so a canary proves the path a message takes from
// here: the produce, the partition, job's consumer, its Redis claim and the
// push to every comet with a lease. Job and comets record the age of the
// newest canary per partition; a partition whose canaries stop is a
// partition whose messages stop. Nothing here runs per message.
//
// A record goes to the partition its key hashes to (kafkax.Partition), so
// the canary of partition p carries a key chosen to hash to p; the keys
// are found once per partition count.

// canaryPartitionsEvery is how often the topic's partition count is read
// again, so partitions added to the topic get canaries too.
const canaryPartitionsEvery = 30 * time.Second

// canaries writes the canaries of one logic.
type canaries struct {
	s        *Server
	written  *prometheus.CounterVec // result: ok, failed
	keys     [][]byte               // per partition, for len(keys) partitions
	readAt   time.Time
	interval time.Duration
}

func newCanaries(s *Server, reg prometheus.Registerer) *canaries {
	c := &canaries{s: s, interval: s.cfg.CanaryInterval,
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "canaries_total",
			Help: "Canary records written to the room topic (one per partition every logic.canary_interval), by result: ok (Kafka acknowledged it) or failed.",
		}, []string{"result"})}
	reg.MustRegister(c.written)
	telemetry.Precreate(c.written.MetricVec, []string{"ok", "failed"})
	return c
}

// run writes canaries every interval until ctx ends; it returns at once
// when canaries are off.
func (c *canaries) run(ctx context.Context) {
	if c.interval <= 0 {
		return
	}
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.tick(ctx)
		}
	}
}

// tick writes one canary to every partition, all at once, each bounded by
// the interval, and waits for them: a Kafka that does not answer delays
// the next round instead of piling canaries up.
func (c *canaries) tick(ctx context.Context) {
	if err := c.readPartitions(ctx); err != nil {
		c.written.WithLabelValues("failed").Inc()
		c.s.log.Debug("canary: partitions of the topic", zap.Error(err))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.interval)
	defer cancel()
	var wg sync.WaitGroup
	for p, key := range c.keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.write(ctx, p, key)
		}()
	}
	wg.Wait()
}

// write writes the canary of partition p.
func (c *canaries) write(ctx context.Context, p int, key []byte) {
	now := time.Now()
	v, err := danmaku.MarshalCanary(danmaku.Canary{ID: "canary-" + c.s.ids.Next(), Partition: p,
		Partitions: len(c.keys), TS: now.UnixMilli()})
	if err == nil {
		err = c.s.producer.Write(ctx, key, now, v)
	}
	if err != nil {
		c.written.WithLabelValues("failed").Inc()
		c.s.log.Debug("canary not written", zap.Int("partition", p), zap.Error(err))
		return
	}
	c.written.WithLabelValues("ok").Inc()
}

// readPartitions reads the topic's partition count when it is unknown or
// old and finds a key for each partition.
func (c *canaries) readPartitions(ctx context.Context) error {
	if len(c.keys) > 0 && time.Since(c.readAt) < canaryPartitionsEvery {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.interval)
	defer cancel()
	n, err := kafkax.Partitions(rctx, c.s.kafka.Brokers, c.s.kafka.Topic)
	if err != nil {
		return err
	}
	c.readAt = time.Now()
	if n != len(c.keys) {
		c.keys = canaryKeys(n)
	}
	return nil
}

// canaryKeys returns, for each of n partitions, a record key that hashes
// to it: the first of canary:0, canary:1, ... that does.
func canaryKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for found, k := 0, 0; found < n; k++ {
		key := []byte(danmaku.CanaryKeyPrefix + strconv.Itoa(k))
		if p := kafkax.Partition(key, n); keys[p] == nil {
			keys[p] = key
			found++
		}
	}
	return keys
}
