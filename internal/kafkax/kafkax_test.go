package kafkax_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
)

func TestEnsureTopicIdempotent(t *testing.T) {
	b := kafkabroker.Start(t)
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
