// Package kafkabroker starts the embedded Kafka-protocol broker
// (internal/devbroker) on a loopback port for a test and stops it when the
// test ends, with the options the service needs: seeded topics, auto topic
// creation, short consumer-group session timeouts, an optional data
// directory, and a stop / restart on the same port so a test can take
// "Kafka" away and bring it back.
//
//	b := kafkabroker.Start(t, kafkabroker.Topic("rooms", 4))
//	w := &kafka.Writer{Addr: kafka.TCP(b.Addr()), Topic: "rooms", ...}
//
// Behaviour of segmentio/kafka-go against this broker that tests must allow
// for (each is exercised by this package's tests):
//
//   - Without DataDir a restart starts empty: topics, records and committed
//     group offsets are gone. Restart re-seeds the topics given with Topic,
//     so a producer recovers; a consumer group starts again from its
//     configured start offset. With DataDir everything survives.
//   - Stop closes the listener and every client connection at once; kafka-go
//     writers and readers see dial or EOF errors and reconnect by
//     themselves once Restart has the port listening again. A writer's
//     batch that was in flight when the broker stopped is retried in the
//     background up to Writer.MaxAttempts times, so a record whose
//     WriteMessages call already returned an error may still be written
//     later; consumers must deduplicate on the message id anyway.
//   - kafka-go's Writer only asks the broker to create a missing topic when
//     Writer.AllowAutoTopicCreation is set, and the broker only does it with
//     AutoCreate; created topics get the broker's default partition count
//     (DefaultPartitions, 10 unless set). Services create their topic
//     explicitly (internal/kafkax.EnsureTopic), which honours the requested
//     partition count; a second CreateTopics answers TOPIC_ALREADY_EXISTS.
//   - A kafka.Client (and the Transport a Writer uses) caches metadata for
//     a few seconds, so a topic created by another client can read as
//     UNKNOWN_TOPIC_OR_PARTITION for that long. Create topics before the
//     writer's first use, or use a fresh client.
//   - Consumer groups (kafka.Reader with GroupID): kfake refuses session
//     timeouts below its minimum (6 s by default) with
//     INVALID_SESSION_TIMEOUT, and kafka-go does not return that from
//     FetchMessage: the reader retries the join silently and FetchMessage
//     blocks until its context ends (the error only shows in
//     Reader.Stats().Errors and the ErrorLogger). This package lowers the
//     minimum to one second (MinSessionTimeout), so tests can use
//     SessionTimeout 1 s, HeartbeatInterval 200-500 ms and RebalanceTimeout
//     1-5 s. The first join takes a moment: poll for the first message with
//     a deadline rather than assuming the group is assigned when NewReader
//     returns. Records read but not committed are read again by the next
//     member (at-least-once); with CommitInterval 0 a committed offset is
//     visible to the next generation immediately.
//   - kafka-go's NewReader panics when MinBytes is set without MaxBytes
//     ("minimum batch size greater than the maximum"): set both.
package kafkabroker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku/internal/devbroker"
)

// Broker is the embedded broker a test started.
type Broker = devbroker.Broker

// Option configures a Broker.
type Option func(*devbroker.Options)

// Topic seeds a topic with the given number of partitions; it is created
// again on every Restart (a no-op when DataDir kept it).
func Topic(name string, partitions int) Option {
	return func(o *devbroker.Options) {
		o.Topics = append(o.Topics, devbroker.Topic{Name: name, Partitions: partitions})
	}
}

// AutoCreate lets metadata requests create missing topics, which kafka-go
// asks for when Writer.AllowAutoTopicCreation is set.
func AutoCreate() Option { return func(o *devbroker.Options) { o.AutoCreate = true } }

// DataDir keeps topics, records and committed offsets in dir across
// restarts.
func DataDir(dir string) Option { return func(o *devbroker.Options) { o.DataDir = dir } }

// DefaultPartitions sets the partition count of auto-created topics.
func DefaultPartitions(n int) Option { return func(o *devbroker.Options) { o.DefaultPartitions = n } }

// MinSessionTimeout sets the smallest consumer-group session timeout the
// broker accepts (default one second).
func MinSessionTimeout(d time.Duration) Option {
	return func(o *devbroker.Options) { o.MinSessionTimeout = d }
}

// Start starts a broker on a free loopback port and stops it when the test
// ends. It fails the test when the broker cannot start.
func Start(tb testing.TB, opts ...Option) *Broker {
	tb.Helper()
	var o devbroker.Options
	for _, opt := range opts {
		opt(&o)
	}
	b, err := devbroker.Start(o)
	if err != nil {
		tb.Fatalf("kafkabroker: %v", err)
	}
	tb.Cleanup(b.Stop)
	return b
}

// WaitReady polls until a metadata request for topic (or any metadata
// when topic is "") succeeds at addr, or ctx ends.
func WaitReady(ctx context.Context, addr, topic string) error {
	for {
		err := probe(ctx, addr, topic)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkabroker: broker %s not ready: %w", addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func probe(ctx context.Context, addr, topic string) error {
	// A fresh transport: the shared default one caches metadata and would
	// keep answering from before a restart.
	tr := &kafka.Transport{DialTimeout: time.Second, MetadataTTL: time.Millisecond}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(addr), Timeout: time.Second, Transport: tr}
	req := &kafka.MetadataRequest{}
	if topic != "" {
		req.Topics = []string{topic}
	}
	resp, err := c.Metadata(ctx, req)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if t.Error != nil {
			return t.Error
		}
	}
	return nil
}
