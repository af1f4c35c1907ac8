package kafkax_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku/internal/kafkatest"
	"github.com/danmaku/danmaku/internal/kafkax"
)

func TestEnsureTopicIdempotent(t *testing.T) {
	b := kafkatest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range []bool{true, false} {
		created, err := kafkax.EnsureTopic(ctx, b.Brokers(), kafkax.Topic{Name: "rooms", Partitions: 6, Replication: 1})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if created != want {
			t.Fatalf("call %d: created = %v, want %v", i, created, want)
		}
	}
	n, err := kafkax.Partitions(ctx, b.Brokers(), "rooms")
	if err != nil || n != 6 {
		t.Fatalf("partitions = %d, %v; want 6", n, err)
	}
	if err := kafkax.Ping(ctx, b.Brokers(), "rooms"); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := kafkax.Ping(ctx, b.Brokers(), "missing"); !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Fatalf("ping of a missing topic = %v, want UnknownTopicOrPartition", err)
	}
	b.Stop()
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer pcancel()
	if err := kafkax.Ping(pctx, b.Brokers(), "rooms"); err == nil {
		t.Fatal("ping of a stopped broker succeeded")
	}
}

// A room must always land on one partition: the writer hashes the key.
func TestWriterKeepsKeyOnOnePartition(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Topic("rooms", 8))
	w := kafkax.NewWriter(b.Brokers(), "rooms", kafkax.WriterConfig{BatchTimeout: 2 * time.Millisecond, WriteTimeout: 2 * time.Second, MaxAttempts: 3})
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := []string{"room_a", "room_b", "room_c", "room_d"}
	for round := 0; round < 3; round++ {
		for _, k := range keys {
			if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(k), Value: []byte{byte(round)}}); err != nil {
				t.Fatalf("write: %v", err)
			}
		}
	}
	seen := map[string]map[int]int{}
	for p := 0; p < 8; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Brokers(), Topic: "rooms", Partition: p, MaxWait: 50 * time.Millisecond})
		conn, err := kafka.DialLeader(ctx, "tcp", b.Addr(), "rooms", p)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < last; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if seen[string(m.Key)] == nil {
				seen[string(m.Key)] = map[int]int{}
			}
			seen[string(m.Key)][p]++
		}
		r.Close()
	}
	for _, k := range keys {
		if len(seen[k]) != 1 {
			t.Errorf("key %s on partitions %v, want exactly one", k, seen[k])
		}
		for _, n := range seen[k] {
			if n != 3 {
				t.Errorf("key %s: %d records, want 3", k, n)
			}
		}
	}
}

// With nothing listening, start-up says so in plain words instead of the
// client's protocol error.
func TestEnsureTopicUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err = kafkax.EnsureTopicWait(ctx, []string{addr}, kafkax.Topic{Name: "t", Partitions: 1, Replication: 1}, nil)
	var ue *kafkax.UnreachableError
	if !errors.As(err, &ue) || err.Error() != "cannot reach Kafka at "+addr+": connection refused" {
		t.Fatalf("err = %v", err)
	}
}
