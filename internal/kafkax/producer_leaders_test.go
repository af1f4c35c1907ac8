package kafkax

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/danmaku/danmaku/internal/testkit"
)

// startCluster runs a kfake cluster of n brokers (nodes 0..n-1) with topic
// rooms of parts partitions, partition i led by node i mod n, and a
// producer for it.
func startCluster(t *testing.T, brokers, parts int, pc ProducerConfig) (*kfake.Cluster, *Producer) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(int32(parts), "rooms"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for i := 0; i < parts; i++ {
		if err := c.MoveTopicPartition("rooms", int32(i), int32(i%brokers)); err != nil {
			t.Fatal(err)
		}
	}
	return c, newTestProducer(t, c.ListenAddrs(), "rooms", pc)
}

// endOffsets returns each partition's end offset: how many records it got.
func endOffsets(t *testing.T, c *kfake.Cluster, parts int) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr := &kafka.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	kc := &kafka.Client{Addr: kafka.TCP(c.ListenAddrs()...), Transport: tr}
	reqs := make([]kafka.OffsetRequest, parts)
	for i := range reqs {
		reqs[i] = kafka.LastOffsetOf(i)
	}
	resp, err := kc.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{"rooms": reqs}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, parts)
	for _, po := range resp.Topics["rooms"] {
		if po.Error != nil {
			t.Fatalf("partition %d: %v", po.Partition, po.Error)
		}
		out[po.Partition] = po.LastOffset
	}
	return out
}

// keyOn returns a key whose partition is led by node (want true) or by
// another node (want false).
func keyOn(t *testing.T, c *kfake.Cluster, parts int, node int32, want bool) (string, int) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		k := fmt.Sprintf("room_%d", i)
		p := Partition([]byte(k), parts)
		if (c.LeaderFor("rooms", int32(p)) == node) == want {
			return k, p
		}
	}
	t.Fatalf("no key led by node %d (%v)", node, want)
	return "", 0
}

// Each request goes to one leader; writes over partitions led by three
// brokers all land, each in its key's partition.
func TestProducerSeveralLeaders(t *testing.T) {
	const parts = 6
	c, p := startCluster(t, 3, parts, ProducerConfig{WriteTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := make([]int64, parts)
	errs := make(chan error, 60)
	for i := 0; i < 60; i++ {
		k := fmt.Sprintf("room_%d", i%20)
		want[Partition([]byte(k), parts)]++
		go func() { errs <- p.Write(ctx, []byte(k), time.Now(), []byte("v")) }()
	}
	for i := 0; i < 60; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := endOffsets(t, c, parts); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records per partition %v, want %v", got, want)
	}
}

// A broker that does not answer holds up only the partitions it leads.
func TestProducerSlowLeaderHoldsOnlyItsPartitions(t *testing.T) {
	const parts = 6
	c, p := startCluster(t, 3, parts, ProducerConfig{WriteTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slowKey, slowPart := keyOn(t, c, parts, 0, true)
	fastKey, fastPart := keyOn(t, c, parts, 0, false)
	// Learn the metadata before the stall.
	if err := p.Write(ctx, []byte(fastKey), time.Now(), []byte("warm")); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	var slept atomic.Bool
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if c.CurrentNode() == 0 && slept.CompareAndSwap(false, true) {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	slow := make(chan error, 1)
	go func() { slow <- p.Write(ctx, []byte(slowKey), time.Now(), []byte("slow")) }()
	testkit.SucceedsSoon(t, 2*time.Second, func() error {
		if !slept.Load() {
			return errors.New("the slow broker has not got the request")
		}
		return nil
	})
	start := time.Now()
	if err := p.Write(ctx, []byte(fastKey), time.Now(), []byte("fast")); err != nil {
		t.Fatalf("write to another leader: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a write to another leader took %v behind the slow one", d)
	}
	select {
	case err := <-slow:
		t.Fatalf("the write to the stalled broker returned early: %v", err)
	default:
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatalf("the stalled write: %v", err)
	}
	got := endOffsets(t, c, parts)
	if got[slowPart] != 1 || got[fastPart] != 2 {
		t.Fatalf("records per partition %v: want 1 on %d, 2 on %d", got, slowPart, fastPart)
	}
}

// When a partition's leader moves, the write that meets NOT_LEADER is
// retried on the new leader once the metadata says so.
func TestProducerFollowsMovedLeader(t *testing.T) {
	const parts = 4
	c, p := startCluster(t, 2, parts, ProducerConfig{WriteTimeout: 2 * time.Second, MetadataTTL: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key, part := keyOn(t, c, parts, 0, true)
	if err := p.Write(ctx, []byte(key), time.Now(), []byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := c.MoveTopicPartition("rooms", int32(part), 1); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(ctx, []byte(key), time.Now(), []byte("after")); err != nil {
		t.Fatalf("write after the leader moved: %v", err)
	}
	if got := endOffsets(t, c, parts); got[part] != 2 {
		t.Fatalf("records per partition %v, want 2 on %d", got, part)
	}
}
