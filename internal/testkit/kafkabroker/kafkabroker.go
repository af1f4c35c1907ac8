// Package kafkabroker runs the embedded Kafka-protocol broker
// (github.com/twmb/franz-go/pkg/kfake) on a loopback port for tests, with
// the options the service needs: seeded topics, auto topic creation, short
// consumer-group session timeouts, an optional data directory, and a stop /
// restart on the same port so a test can take "Kafka" away and bring it back.
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
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Option configures a Broker.
type Option func(*options)

type options struct {
	topics     []topic
	autoCreate bool
	dataDir    string
	defParts   int
	minSession time.Duration
	extra      []kfake.Opt
}

type topic struct {
	name       string
	partitions int
}

// Topic seeds a topic with the given number of partitions; it is created
// again on every Restart (a no-op when DataDir kept it).
func Topic(name string, partitions int) Option {
	return func(o *options) { o.topics = append(o.topics, topic{name, partitions}) }
}

// AutoCreate lets metadata requests create missing topics, which kafka-go
// asks for when Writer.AllowAutoTopicCreation is set.
func AutoCreate() Option { return func(o *options) { o.autoCreate = true } }

// DataDir keeps topics, records and committed offsets in dir across
// restarts.
func DataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

// DefaultPartitions sets the partition count of auto-created topics.
func DefaultPartitions(n int) Option { return func(o *options) { o.defParts = n } }

// MinSessionTimeout sets the smallest consumer-group session timeout the
// broker accepts (default one second).
func MinSessionTimeout(d time.Duration) Option { return func(o *options) { o.minSession = d } }

// With passes raw kfake options through.
func With(opts ...kfake.Opt) Option {
	return func(o *options) { o.extra = append(o.extra, opts...) }
}

// Broker is one embedded single-node Kafka cluster on 127.0.0.1.
type Broker struct {
	mu      sync.Mutex // guards cluster
	opts    options
	port    int
	cluster *kfake.Cluster // nil while stopped
}

// Start starts a broker and stops it when the test ends. It fails the test
// when the broker cannot start.
func Start(tb testing.TB, opts ...Option) *Broker {
	tb.Helper()
	b, err := New(opts...)
	if err != nil {
		tb.Fatalf("kafkabroker: %v", err)
	}
	tb.Cleanup(b.Stop)
	return b
}

// New starts a broker on a free loopback port. The caller must Stop it.
func New(opts ...Option) (*Broker, error) {
	o := options{minSession: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	b := &Broker{opts: o}
	if err := b.start(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Broker) start() error {
	kopts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(b.opts.minSession),
	}
	if b.port != 0 {
		kopts = append(kopts, kfake.Ports(b.port))
	}
	if b.opts.autoCreate {
		kopts = append(kopts, kfake.AllowAutoTopicCreation())
	}
	if b.opts.defParts > 0 {
		kopts = append(kopts, kfake.DefaultNumPartitions(b.opts.defParts))
	}
	if b.opts.dataDir != "" {
		kopts = append(kopts, kfake.DataDir(b.opts.dataDir))
	}
	for _, t := range b.opts.topics {
		kopts = append(kopts, kfake.SeedTopics(int32(t.partitions), t.name))
	}
	kopts = append(kopts, b.opts.extra...)

	// Right after a stop the old listener's port can take a moment to be
	// free again; retry briefly rather than failing a restart test.
	var (
		c   *kfake.Cluster
		err error
	)
	for attempt := 0; attempt < 50; attempt++ {
		if c, err = kfake.NewCluster(kopts...); err == nil {
			break
		}
		if b.port == 0 {
			return fmt.Errorf("start kfake: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("start kfake on port %d: %w", b.port, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		return fmt.Errorf("kfake listens on %v, want one address", addrs)
	}
	_, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		c.Close()
		return fmt.Errorf("kfake address %q: %w", addrs[0], err)
	}
	b.port, _ = strconv.Atoi(port)
	b.mu.Lock()
	b.cluster = c
	b.mu.Unlock()
	return nil
}

// Addr is the broker's host:port; it stays the same across Restart.
func (b *Broker) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// Brokers returns Addr as a bootstrap list.
func (b *Broker) Brokers() []string { return []string{b.Addr()} }

// Cluster returns the running kfake cluster, nil while stopped.
func (b *Broker) Cluster() *kfake.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cluster
}

// Stop shuts the broker down and drops every client connection. Safe to
// call more than once.
func (b *Broker) Stop() {
	b.mu.Lock()
	c := b.cluster
	b.cluster = nil
	b.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Restart stops the broker if it runs and starts it again on the same port
// with the same options.
func (b *Broker) Restart() error {
	b.Stop()
	return b.start()
}

// WaitReady polls until a metadata request for topic (or any metadata
// when topic is "") succeeds, or ctx ends.
func (b *Broker) WaitReady(ctx context.Context, topic string) error {
	for {
		err := probe(ctx, b.Addr(), topic)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkabroker: broker %s not ready: %w", b.Addr(), err)
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
