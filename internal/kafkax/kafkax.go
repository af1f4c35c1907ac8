// Package kafkax holds the Kafka plumbing shared by the roles that talk to
// the room topic: creating the topic at start-up, the producer every room
// message goes through (Producer, which gathers the records of concurrent
// writes into few produce requests), and a reachability probe for
// readiness checks. It is built on github.com/segmentio/kafka-go's
// Transport.
package kafkax

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/metadata"
)

// Topic describes the topic to create when it is missing.
type Topic struct {
	Name        string
	Partitions  int
	Replication int
}

// EnsureTopic creates t on the cluster reachable through brokers unless it
// already exists. It is idempotent: an existing topic is left as it is (its
// partition count is not changed, since that would move rooms between
// partitions and break per-room ordering) and created reports false. The
// request goes to the controller; ctx bounds the whole call. When no broker
// accepts a connection the error is an *UnreachableError.
func EnsureTopic(ctx context.Context, brokers []string, t Topic) (created bool, err error) {
	if len(brokers) == 0 {
		return false, errors.New("ensure topic: no brokers")
	}
	tr := newTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: timeoutOf(ctx, 10*time.Second)}
	resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic:             t.Name,
		NumPartitions:     t.Partitions,
		ReplicationFactor: t.Replication,
	}}})
	if err != nil {
		if rerr := reachable(ctx, brokers); rerr != nil {
			return false, rerr
		}
		return false, fmt.Errorf("create topic %s: %w", t.Name, err)
	}
	switch err := resp.Errors[t.Name]; {
	case err == nil:
		return true, nil
	case errors.Is(err, kafka.TopicAlreadyExists):
		return false, nil
	default:
		return false, fmt.Errorf("create topic %s: %w", t.Name, err)
	}
}

// EnsureTopicWait is EnsureTopic retried every second until it succeeds
// or ctx ends, for start-up while the brokers are still coming up. retry,
// if not nil, is told of each failed attempt.
func EnsureTopicWait(ctx context.Context, brokers []string, t Topic, retry func(error)) (created bool, err error) {
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		created, err = EnsureTopic(actx, brokers, t)
		cancel()
		if err == nil {
			return created, nil
		}
		if retry != nil {
			retry(err)
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(time.Second):
		}
	}
}

// EnsureTopicLike is EnsureTopic for a companion topic of topic like:
// t is created, when missing, with like's partition count (t.Partitions is
// ignored), so a record keyed as like's records goes to the partition of
// the same number. like must exist.
func EnsureTopicLike(ctx context.Context, brokers []string, like string, t Topic) error {
	n, err := Partitions(ctx, brokers, like)
	if err != nil {
		return err
	}
	t.Partitions = n
	_, err = EnsureTopic(ctx, brokers, t)
	return err
}

// Partitions returns the partition count of topic as the cluster reports
// it now (fresh metadata, no cache).
func Partitions(ctx context.Context, brokers []string, topic string) (int, error) {
	tr := newTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(ctx, 5*time.Second))
	defer cancel()
	leaders, err := Leaders(ctx, tr, kafka.TCP(brokers...), topic)
	return len(leaders), err
}

// Leaders returns the leader broker of each partition of topic, indexed by
// partition (-1: none now), from one metadata request through rt to addr.
// A topic that does not exist is kafka.UnknownTopicOrPartition.
func Leaders(ctx context.Context, rt kafka.RoundTripper, addr net.Addr, topic string) ([]int32, error) {
	r, err := rt.RoundTrip(ctx, addr, &metadata.Request{TopicNames: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata %s: %w", topic, err)
	}
	for _, t := range r.(*metadata.Response).Topics {
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("metadata %s: %w", topic, kafka.Error(t.ErrorCode))
		}
		if len(t.Partitions) == 0 {
			break
		}
		leaders := make([]int32, len(t.Partitions))
		for i := range leaders {
			leaders[i] = -1
		}
		for _, tp := range t.Partitions {
			if tp.PartitionIndex < 0 || int(tp.PartitionIndex) >= len(leaders) {
				return nil, fmt.Errorf("metadata %s: partition %d of %d", topic, tp.PartitionIndex, len(leaders))
			}
			leaders[tp.PartitionIndex] = tp.LeaderID
		}
		return leaders, nil
	}
	return nil, fmt.Errorf("metadata %s: %w", topic, kafka.UnknownTopicOrPartition)
}

// Ping reports whether one of brokers answers a metadata request for
// topic within ctx and the topic exists. A fresh connection is used so the
// answer reflects the cluster now, not a pooled connection or cached
// metadata.
func Ping(ctx context.Context, brokers []string, topic string) error {
	_, err := Partitions(ctx, brokers, topic)
	return err
}

func newTransport(dial time.Duration) *kafka.Transport {
	if dial <= 0 {
		dial = 5 * time.Second
	}
	return &kafka.Transport{DialTimeout: dial, MetadataTTL: 5 * time.Second}
}

// timeoutOf returns the time left until ctx's deadline, or def without one.
func timeoutOf(ctx context.Context, def time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
		return time.Millisecond
	}
	return def
}
