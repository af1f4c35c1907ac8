package kafkax

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
)

func newTestProducer(t *testing.T, brokers []string, topic string, c ProducerConfig) *Producer {
	t.Helper()
	if c.DialTimeout == 0 {
		c.DialTimeout = time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 2 * time.Second
	}
	p := NewProducer(brokers, topic, c)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// countProduce counts the produce requests the broker receives from now on
// and the records in them.
func countProduce(b *kafkabroker.Broker) (requests, records *atomic.Int64) {
	requests, records = new(atomic.Int64), new(atomic.Int64)
	b.Cluster().ControlKey(kmsg.Produce.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		requests.Add(1)
		for _, t := range r.(*kmsg.ProduceRequest).Topics {
			for _, p := range t.Partitions {
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(p.Records); err == nil {
					records.Add(int64(rb.NumRecords))
				}
			}
		}
		return nil, nil, false // observed only; the broker handles it
	})
	return requests, records
}

// failProduce makes the broker answer the next produce request with code
// for every partition, without writing anything.
func failProduce(b *kafkabroker.Broker, code int16) {
	b.Cluster().ControlKey(kmsg.Produce.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.Version = req.Version
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
}

// readTopic returns every record of topic by partition.
func readTopic(t *testing.T, b *kafkabroker.Broker, topic string, parts int) [][]kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make([][]kafka.Message, parts)
	for p := 0; p < parts; p++ {
		conn, err := kafka.DialLeader(ctx, "tcp", b.Addr(), topic, p)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if last == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Brokers(), Topic: topic, Partition: p, MaxWait: 50 * time.Millisecond})
		for i := int64(0); i < last; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d offset %d of %d: %v", p, i, last, err)
			}
			out[p] = append(out[p], m)
		}
		r.Close()
	}
	return out
}

// topicValues lists the values of every record of topic rooms, partition
// after partition.
func topicValues(t *testing.T, b *kafkabroker.Broker, parts int) string {
	t.Helper()
	var got []string
	for _, msgs := range readTopic(t, b, "rooms", parts) {
		for _, m := range msgs {
			got = append(got, string(m.Value))
		}
	}
	return strings.Join(got, ",")
}

// The partition of a key is kafka.Hash's: the job and other producers
// rely on it.
func TestPartitionMatchesKafkaHash(t *testing.T) {
	var h kafka.Hash
	for _, n := range []int{1, 2, 3, 4, 7, 16, 64, 100, 1000} {
		ids := make([]int, n)
		for i := range ids {
			ids[i] = i
		}
		for i := 0; i < 2000; i++ {
			key := []byte(fmt.Sprintf("room_%d", i))
			if i%7 == 0 {
				key = []byte(strings.Repeat("房", i%13+1)) // high bytes, long keys
			}
			if got, want := Partition(key, n), h.Balance(kafka.Message{Key: key}, ids...); got != want {
				t.Fatalf("Partition(%q, %d) = %d, kafka.Hash picks %d", key, n, got, want)
			}
		}
	}
}

// A room must always land on one partition, the one kafka-go's Writer with
// kafka.Hash picks for the same key.
func TestProducerPartitionsLikeWriter(t *testing.T) {
	const parts = 8
	b := kafkabroker.Start(t, kafkabroker.Topic("rooms", parts))
	p := newTestProducer(t, b.Brokers(), "rooms", ProducerConfig{})
	w := &kafka.Writer{Addr: kafka.TCP(b.Addr()), Topic: "rooms", Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := []string{"room_a", "room_b", "room_c", "room_d", "bench_room_17"}
	for round := 0; round < 3; round++ {
		for _, k := range keys {
			if err := p.Write(ctx, []byte(k), time.Now(), []byte("producer")); err != nil {
				t.Fatalf("write: %v", err)
			}
		}
	}
	for _, k := range keys {
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(k), Value: []byte("writer")}); err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	seen := map[string]map[int]int{}
	for part, msgs := range readTopic(t, b, "rooms", parts) {
		for _, m := range msgs {
			k := string(m.Key) + "/" + string(m.Value)
			if seen[k] == nil {
				seen[k] = map[int]int{}
			}
			seen[k][part]++
		}
	}
	for _, k := range keys {
		ours, theirs := seen[k+"/producer"], seen[k+"/writer"]
		if len(ours) != 1 || len(theirs) != 1 {
			t.Fatalf("key %s: producer on %v, writer on %v; want one partition each", k, ours, theirs)
		}
		for part, n := range ours {
			if n != 3 || theirs[part] != 1 || part != Partition([]byte(k), parts) {
				t.Errorf("key %s: producer %v, writer %v, Partition %d", k, ours, theirs, Partition([]byte(k), parts))
			}
		}
	}
}

// Many concurrent writers over many keys: every record lands once, in its
// key's partition, each write's records together and in order, each
// writer's writes in order, in far fewer produce requests than writes.
func TestProducerGroupsConcurrentWrites(t *testing.T) {
	const (
		parts   = 8
		writers = 64
		rounds  = 20
		rooms   = 40
	)
	b := kafkabroker.Start(t, kafkabroker.Topic("rooms", parts))
	p := newTestProducer(t, b.Brokers(), "rooms", ProducerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Learn the metadata first, so the count below is of produce requests
	// carrying the load.
	if err := p.Write(ctx, []byte("warm"), time.Now(), []byte("warm")); err != nil {
		t.Fatal(err)
	}
	requests, records := countProduce(b)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			room := []byte(fmt.Sprintf("room_%d", w%rooms))
			for r := 0; r < rounds; r++ {
				n := 1 + (w+r)%3
				vals := make([][]byte, n)
				for i := range vals {
					vals[i] = []byte(fmt.Sprintf("%d/%d/%d/%d", w, r, i, n))
				}
				if err := p.Write(ctx, room, time.Now(), vals...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	total := 0
	seen := map[string]bool{}
	lastRound := map[int]int{}
	for part, msgs := range readTopic(t, b, "rooms", parts) {
		for i := 0; i < len(msgs); i++ {
			m := msgs[i]
			if string(m.Key) == "warm" {
				continue
			}
			if want := Partition(m.Key, parts); part != want {
				t.Fatalf("%s on partition %d, want %d", m.Key, part, want)
			}
			var w, r, idx, n int
			if _, err := fmt.Sscanf(string(m.Value), "%d/%d/%d/%d", &w, &r, &idx, &n); err != nil {
				t.Fatalf("value %q: %v", m.Value, err)
			}
			if idx != 0 {
				t.Fatalf("partition %d offset %d: %q does not start a write", part, m.Offset, m.Value)
			}
			if last, ok := lastRound[w]; ok && r <= last {
				t.Fatalf("writer %d: round %d after round %d", w, r, last)
			}
			lastRound[w] = r
			// The rest of the write follows at once, in order.
			for j := 0; j < n; j++ {
				if i+j >= len(msgs) || string(msgs[i+j].Value) != fmt.Sprintf("%d/%d/%d/%d", w, r, j, n) {
					t.Fatalf("partition %d: write %d/%d not contiguous at record %d", part, w, r, j)
				}
				if seen[string(msgs[i+j].Value)] {
					t.Fatalf("%q written twice", msgs[i+j].Value)
				}
				seen[string(msgs[i+j].Value)] = true
			}
			i += n - 1
			total += n
		}
	}
	want := 0
	for w := 0; w < writers; w++ {
		for r := 0; r < rounds; r++ {
			want += 1 + (w+r)%3
		}
	}
	if total != want {
		t.Fatalf("%d records, want %d", total, want)
	}
	if got := records.Load(); got != int64(want) {
		t.Errorf("the broker received %d records, want %d", got, want)
	}
	writes := int64(writers * rounds)
	t.Logf("%d writes (%d records) in %d produce requests", writes, want, requests.Load())
	if n := requests.Load(); n == 0 || n*4 > writes {
		t.Errorf("%d produce requests for %d writes, want at most a quarter", n, writes)
	}
}

// A retriable error of the broker is retried: the write succeeds and its
// records are written once. A non-retriable one fails the write at once.
func TestProducerRetriesRetriableErrors(t *testing.T) {
	b := kafkabroker.Start(t, kafkabroker.Topic("rooms", 2))
	p := newTestProducer(t, b.Brokers(), "rooms", ProducerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Write(ctx, []byte("r"), time.Now(), []byte("first")); err != nil {
		t.Fatal(err)
	}
	requests, _ := countProduce(b)
	failProduce(b, int16(kafka.NotLeaderForPartition))
	if err := p.Write(ctx, []byte("r"), time.Now(), []byte("retried")); err != nil {
		t.Fatalf("write after NOT_LEADER: %v", err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d produce requests, want 2 (the failed one and its retry)", n)
	}

	failProduce(b, int16(kafka.MessageSizeTooLarge))
	start := time.Now()
	err := p.Write(ctx, []byte("r"), time.Now(), []byte("refused"))
	if !errors.Is(err, kafka.MessageSizeTooLarge) {
		t.Fatalf("write refused as too large = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a non-retriable failure took %v", d)
	}
	if err := p.Write(ctx, []byte("r"), time.Now(), []byte("after")); err != nil {
		t.Fatal(err)
	}
	if got := topicValues(t, b, 2); got != "first,retried,after" {
		t.Fatalf("records %s, want first,retried,after", got)
	}
}

// With the broker gone, writes fail when their context ends, with the
// reason; a write whose context outlasts the outage succeeds once the
// broker is back, and so do later writes.
func TestProducerBrokerDownAndBack(t *testing.T) {
	b := kafkabroker.Start(t, kafkabroker.Topic("rooms", 4))
	p := newTestProducer(t, b.Brokers(), "rooms", ProducerConfig{WriteTimeout: 500 * time.Millisecond, DialTimeout: 200 * time.Millisecond, MetadataTTL: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Write(ctx, []byte("r"), time.Now(), []byte("before")); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	for i := 0; i < 3; i++ {
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		err := p.Write(wctx, []byte("r"), time.Now(), []byte("lost"))
		wcancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("write with the broker down = %v, want the deadline", err)
		}
		if !strings.Contains(err.Error(), "last failure") {
			t.Errorf("error %q does not say why", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("write with the broker down took %v", d)
		}
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Write(ctx, []byte("r"), time.Now(), []byte("waited")) }()
	time.Sleep(300 * time.Millisecond)
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("write across the restart: %v", err)
	}
	if err := p.Write(ctx, []byte("r"), time.Now(), []byte("after")); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	// The restarted broker starts empty: only what was written since.
	if got := topicValues(t, b, 4); got != "waited,after" {
		t.Fatalf("records after the restart %s, want waited,after", got)
	}
}

// Close sends what is queued and waits for it; then writes are refused.
func TestProducerCloseFlushes(t *testing.T) {
	b := kafkabroker.Start(t, kafkabroker.Topic("rooms", 4))
	p := newTestProducer(t, b.Brokers(), "rooms", ProducerConfig{Linger: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const writes = 20
	errs := make(chan error, writes)
	for i := 0; i < writes; i++ {
		go func() { errs <- p.Write(ctx, []byte(fmt.Sprint("room_", i)), time.Now(), []byte("v")) }()
	}
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.queue) != writes {
			return fmt.Errorf("%d writes queued", len(p.queue))
		}
		return nil
	})
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	for i := 0; i < writes; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("queued write: %v", err)
		}
	}
	n := 0
	for _, msgs := range readTopic(t, b, "rooms", 4) {
		n += len(msgs)
	}
	if n != writes {
		t.Fatalf("%d records after close, want %d", n, writes)
	}
	if err := p.Write(ctx, []byte("r"), time.Now(), []byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close = %v, want ErrClosed", err)
	}
}
