package job

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
)

const testParts = 4

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// testConsumer is a consumer fetching on its own goroutine; got collects
// what it hands over.
type testConsumer struct {
	*consumer
	mu      sync.Mutex
	batches int
	got     []record
}

func newTestBroker(t *testing.T, opts ...kafkabroker.Option) (*kafkabroker.Broker, config.Kafka) {
	topic := testkit.Uniq("rooms")
	b := kafkabroker.Start(t, append(opts, kafkabroker.Topic(topic, testParts), kafkabroker.MinSessionTimeout(time.Second))...)
	return b, config.Kafka{Brokers: b.Brokers(), Topic: topic, Partitions: testParts, Replication: 1, Group: testkit.Uniq("group")}
}

// startConsumer starts a group member. With hold it does not take what
// the member fetches until release is closed.
func startConsumer(t *testing.T, k config.Kafka, release <-chan struct{}) *testConsumer {
	cfg := DefaultConfig()
	cfg.SessionTimeout, cfg.HeartbeatInterval, cfg.RebalanceTimeout = time.Second, 200*time.Millisecond, 2*time.Second
	cfg.RetryMin, cfg.RetryMax = 50*time.Millisecond, 200*time.Millisecond
	c := newConsumer(cfg, k, testLog(t), newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }))
	if err := c.open(); err != nil {
		t.Fatal(err)
	}
	tc := &testConsumer{consumer: c}
	ctx, cancel := context.WithCancel(context.Background())
	fetched := make(chan struct{})
	go func() { defer close(fetched); c.fetch(ctx) }()
	read := make(chan struct{})
	if release == nil {
		release = closed
	}
	go func() {
		defer close(read)
		select {
		case <-release: // nil: at once
		case <-ctx.Done():
		}
		for b := range c.out {
			tc.mu.Lock()
			tc.batches++
			tc.got = append(tc.got, b...)
			tc.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-fetched
		<-read
		c.close()
	})
	return tc
}

// records returns what the member handed over so far, and in how many
// slices.
func (tc *testConsumer) records() ([]record, int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return slices.Clone(tc.got), tc.batches
}

// assigned is the member's partitions in its current generation.
func (tc *testConsumer) assigned() []int {
	var ids []int
	if p := tc.parts.Load(); p != nil {
		for _, part := range *p {
			ids = append(ids, int(part.id))
		}
	}
	slices.Sort(ids)
	return ids
}

// produce writes n messages to each partition, tagged with tag.
func produce(t *testing.T, k config.Kafka, tag string, n int) {
	t.Helper()
	var recs []kafka.Message
	for i := range n {
		for p := range testParts {
			v, err := danmaku.MarshalEnvelope("room", danmaku.Message{ID: fmt.Sprintf("%s-%d-%d", tag, p, i), Content: "x"})
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, kafka.Message{Key: []byte{byte(p)}, Value: v})
		}
	}
	w := &kafka.Writer{Addr: kafka.TCP(k.Brokers...), Topic: k.Topic, BatchTimeout: time.Millisecond,
		RequiredAcks: kafka.RequireAll,
		Balancer:     kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return int(m.Key[0]) })}
	defer w.Close()
	// Right after a broker restart the first attempts may fail.
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return w.WriteMessages(ctx, recs...)
	})
}

// checkOrder fails unless recs hold, for every partition, the offsets
// from..to-1 each once and in order.
func checkOrder(t *testing.T, recs []record, from, to int64) {
	t.Helper()
	next := map[int]int64{}
	for p := range testParts {
		next[p] = from
	}
	for _, r := range recs {
		if r.err != nil {
			t.Fatalf("partition %d offset %d: %v", r.part, r.off, r.err)
		}
		if r.off != next[r.part] {
			t.Fatalf("partition %d: offset %d handed over after %d", r.part, r.off, next[r.part]-1)
		}
		next[r.part]++
	}
	for p, n := range next {
		if n != to {
			t.Fatalf("partition %d: handed over up to %d, want %d", p, n, to)
		}
	}
}

// A backlog is read in a few slices, each partition's records in offset
// order, and the lag gauge follows it: behind while the records wait,
// zero once they are taken.
func TestFetchHandsOverSlicesInPartitionOrder(t *testing.T) {
	_, k := newTestBroker(t)
	produce(t, k, "a", 500)
	release := make(chan struct{})
	tc := startConsumer(t, k, release)
	// Nothing is taken: once the channel to the scheduler is full, what
	// the member fetched and cannot hand over shows as lag.
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if lag := tc.lag(); lag == 0 {
			produce(t, k, "b", 5)
			return fmt.Errorf("lag %v while records wait", lag)
		}
		return nil
	})
	close(release)
	produce(t, k, "c", 100) // while it polls: still in order, nothing twice
	recs, n := tc.records()
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		recs, n = tc.records()
		if c := countTag(recs, "c"); c < 100*testParts {
			return fmt.Errorf("%d records handed over, %d of the last %d", len(recs), c, 100*testParts)
		}
		return nil
	})
	checkOrder(t, recs, 0, int64(len(recs)/testParts))
	if n > len(recs)/10 {
		t.Fatalf("%d records came in %d slices: fetches are not batched", len(recs), n)
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if lag := tc.lag(); lag != 0 {
			return fmt.Errorf("lag %v with everything read", lag)
		}
		return nil
	})
}

// A second member splits the partitions with the first: each fetches
// only its own from then on, and what the first read without committing
// comes back.
func TestRebalanceSplitsPartitions(t *testing.T) {
	_, k := newTestBroker(t)
	produce(t, k, "a", 20)
	a := startConsumer(t, k, nil)
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if recs, _ := a.records(); len(recs) < 20*testParts {
			return fmt.Errorf("%d records handed over", len(recs))
		}
		return nil
	})
	b := startConsumer(t, k, nil)
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		pa, pb := a.assigned(), b.assigned()
		if len(pa) == 0 || len(pb) == 0 || len(pa)+len(pb) != testParts {
			return fmt.Errorf("assigned %v and %v", pa, pb)
		}
		return nil
	})
	pa, pb := a.assigned(), b.assigned()
	for _, p := range pa {
		if slices.Contains(pb, p) {
			t.Fatalf("partition %d assigned to both members (%v, %v)", p, pa, pb)
		}
	}
	// Nothing was committed: b starts its partitions from the beginning.
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if recs, _ := b.records(); len(recs) < 20*len(pb) {
			return fmt.Errorf("b has %d records of the first 20 per partition", len(recs))
		}
		return nil
	})
	seenA, _ := a.records()
	nA := len(seenA)
	produce(t, k, "b", 10)
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		ra, _ := a.records()
		rb, _ := b.records()
		if got := countTag(ra[nA:], "b") + countTag(rb, "b"); got < 10*testParts {
			return fmt.Errorf("%d of %d new records handed over", got, 10*testParts)
		}
		return nil
	})
	ra, _ := a.records()
	rb, _ := b.records()
	for who, recs := range map[string][]record{"a": ra[nA:], "b": rb} {
		own := pa
		if who == "b" {
			own = pb
		}
		for _, r := range recs {
			if !slices.Contains(own, r.part) {
				t.Fatalf("member %s handed over partition %d, assigned %v", who, r.part, own)
			}
		}
	}
}

func countTag(recs []record, tag string) int {
	n := 0
	for _, r := range recs {
		if len(r.env.Msg.ID) > len(tag) && r.env.Msg.ID[:len(tag)+1] == tag+"-" {
			n++
		}
	}
	return n
}

// While the broker is down fetching is retried, never given up: records
// produced after it is back arrive, after the committed position.
func TestFetchSurvivesBrokerRestart(t *testing.T) {
	b, k := newTestBroker(t, kafkabroker.DataDir(t.TempDir()))
	produce(t, k, "a", 10)
	tc := startConsumer(t, k, nil)
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if recs, _ := tc.records(); len(recs) < 10*testParts {
			return fmt.Errorf("%d records handed over", len(recs))
		}
		return nil
	})
	tc.queue(map[int]int64{0: 10, 1: 10, 2: 10, 3: 10})
	go tc.commitLoop()
	t.Cleanup(tc.finishCommits)
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return committed(k, 10) })
	b.Stop()
	time.Sleep(1500 * time.Millisecond) // fetches and heartbeats fail meanwhile
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	produce(t, k, "b", 10)
	testkit.SucceedsSoon(t, 40*time.Second, func() error {
		recs, _ := tc.records()
		if n := countTag(recs, "b"); n < 10*testParts {
			return fmt.Errorf("%d of %d records produced after the restart handed over", n, 10*testParts)
		}
		return nil
	})
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return committed(k, 10) }) // kept across the restart
	recs, _ := tc.records()
	for _, r := range recs[10*testParts:] {
		if r.off < 10 {
			t.Fatalf("partition %d offset %d handed over again after its commit", r.part, r.off)
		}
	}
}

func testLog(t *testing.T) *zap.Logger { return zaptest.NewLogger(t) }

// committed fails unless the group's committed position is at least
// want on every partition.
func committed(k config.Kafka, want int64) error {
	tr := &kafka.Transport{} // its own connections: none left from before a restart
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: k.Group, Topics: map[string][]int{k.Topic: {0, 1, 2, 3}}})
	if err != nil {
		return err
	}
	for _, p := range res.Topics[k.Topic] {
		if p.CommittedOffset < want {
			return fmt.Errorf("partition %d committed at %d, want %d", p.Partition, p.CommittedOffset, want)
		}
	}
	return nil
}
