package job_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/testkit"
)

// Every delivered batch is told on the positions topic: each message id
// with the position the viewers got it at, in the partition of the same
// number as the room's, in a topic job created with the room topic's
// partition count.
func TestPositionsPublished(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	cfg := jobConfig()
	cfg.PositionsTopic = testkit.Uniq("positions")
	e.startJob(cfg, nil)
	var sent []string
	for i := range 6 {
		sent = append(sent, e.send(room, 7, fmt.Sprint("a", i), fmt.Sprint("b", i), fmt.Sprint("c", i))...)
		time.Sleep(30 * time.Millisecond) // several batches
	}
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if have, _ := v.count(sent); have != len(sent) {
			return fmt.Errorf("viewer has %d of %d", have, len(sent))
		}
		return nil
	})
	seen := map[string]int64{}
	for _, a := range v.messages() {
		seen[a.Msg.ID] = a.Msg.Pos
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if n, err := kafkax.Partitions(ctx, e.kafka.Brokers, cfg.PositionsTopic); err != nil || n != e.kafka.Partitions {
		t.Fatalf("positions topic has %d partitions (%v), want the room topic's %d", n, err, e.kafka.Partitions)
	}
	part := kafkax.Partition([]byte(room), e.kafka.Partitions)
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: e.kafka.Brokers, Topic: cfg.PositionsTopic, Partition: part, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	told := map[string]int64{}
	for len(told) < len(sent) {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read positions (%d of %d so far): %v", len(told), len(sent), err)
		}
		p, err := danmaku.UnmarshalPositions(m.Value)
		if err != nil || p.Room != room || string(m.Key) != room {
			t.Fatalf("record %s (key %s): %v", m.Value, m.Key, err)
		}
		for i, id := range p.IDs {
			told[id] = p.Pos + int64(i)
		}
	}
	for _, id := range sent {
		if told[id] != seen[id] || seen[id] == 0 {
			t.Errorf("message %s: positions topic says %d, the viewer got it at %d", id, told[id], seen[id])
		}
	}
}
