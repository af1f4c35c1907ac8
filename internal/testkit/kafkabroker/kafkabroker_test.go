package kafkabroker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
)

func writer(b *kafkabroker.Broker, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(b.Addr()),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 2 * time.Millisecond,
		MaxAttempts:  3,
		Transport:    &kafka.Transport{DialTimeout: time.Second},
	}
}

func groupReader(b *kafkabroker.Broker, topic, group string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:           b.Brokers(),
		Topic:             topic,
		GroupID:           group,
		StartOffset:       kafka.FirstOffset,
		SessionTimeout:    time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		RebalanceTimeout:  2 * time.Second,
		CommitInterval:    0,
		MaxWait:           100 * time.Millisecond,
		MinBytes:          1,
		MaxBytes:          1 << 20,
	})
}

func write(t *testing.T, w *kafka.Writer, vals ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs := make([]kafka.Message, len(vals))
	for i, v := range vals {
		msgs[i] = kafka.Message{Key: []byte("k"), Value: []byte(v)}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// A consumer group reads, commits, and a second member of the same group
// resumes after the committed offset; the uncommitted record is read again.
func TestConsumerGroupResumesAfterCommit(t *testing.T) {
	b := kafkabroker.Start(t, kafkabroker.Topic("t", 3))
	w := writer(b, "t")
	defer w.Close()
	write(t, w, "a", "b")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r := groupReader(b, "t", "g")
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if string(m.Value) != "a" {
		t.Fatalf("first = %q, want a", m.Value)
	}
	if err := r.CommitMessages(ctx, m); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if m, err = r.FetchMessage(ctx); err != nil || string(m.Value) != "b" {
		t.Fatalf("second = %q, %v; want b", m.Value, err)
	}
	// b is read but not committed.
	r.Close()

	r2 := groupReader(b, "t", "g")
	defer r2.Close()
	m, err = r2.FetchMessage(ctx)
	if err != nil || string(m.Value) != "b" {
		t.Fatalf("after rejoin = %q, %v; want b again", m.Value, err)
	}
}

// Stop drops the broker; writes fail within their context; Restart on the
// same port brings it back and the same writer succeeds again. Without a
// data directory the old records are gone.
func TestStopRestartSamePort(t *testing.T) {
	b := kafkabroker.Start(t, kafkabroker.Topic("t", 2))
	addr := b.Addr()
	w := writer(b, "t")
	defer w.Close()
	write(t, w, "before")

	b.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("down")})
	cancel()
	if err == nil {
		t.Fatal("write to a stopped broker succeeded")
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if b.Addr() != addr {
		t.Fatalf("restart moved the broker from %s to %s", addr, b.Addr())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("after")})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writer did not recover: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(t, b, "t"); n == 0 || n > 3 {
		t.Fatalf("after restart without data dir: %d records, want the new ones only", n)
	}
}

func TestDataDirKeepsRecords(t *testing.T) {
	b := kafkabroker.Start(t, kafkabroker.Topic("t", 1), kafkabroker.DataDir(t.TempDir()))
	w := writer(b, "t")
	write(t, w, "1", "2", "3")
	w.Close()
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, b, "t"); n != 3 {
		t.Fatalf("after restart with data dir: %d records, want 3", n)
	}
}

func TestAutoCreate(t *testing.T) {
	b := kafkabroker.Start(t, kafkabroker.AutoCreate(), kafkabroker.DefaultPartitions(4))
	w := writer(b, "auto")
	w.AllowAutoTopicCreation = true
	defer w.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("x")})
		cancel()
		if err == nil {
			break
		}
		// The first write may see the topic as still being created.
		if !errors.Is(err, kafka.UnknownTopicOrPartition) && !errors.Is(err, kafka.LeaderNotAvailable) || time.Now().After(deadline) {
			t.Fatalf("write: %v", err)
		}
	}
	if n := count(t, b, "auto"); n != 1 {
		t.Fatalf("records = %d, want 1", n)
	}
}

// count sums the last offsets of all partitions of topic.
func count(t *testing.T, b *kafkabroker.Broker, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kafkabroker.WaitReady(ctx, b.Addr(), topic); err != nil {
		t.Fatal(err)
	}
	conn, err := kafka.DialContext(ctx, "tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range parts {
		lc, err := kafka.DialLeader(ctx, "tcp", b.Addr(), topic, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := lc.ReadOffsets()
		lc.Close()
		if err != nil {
			t.Fatal(fmt.Errorf("partition %d: %w", p.ID, err))
		}
		n += last - first
	}
	return n
}
