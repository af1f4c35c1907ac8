package job_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku/internal/testkit"
)

// roomPerPartition returns one room name for each of the topic's n
// partitions (logic keys records by room, kafka.Hash).
func roomPerPartition(n int) []string {
	rooms := make([]string, n)
	for found := 0; found < n; {
		r := testkit.Uniq("room")
		p := (&kafka.Hash{}).Balance(kafka.Message{Key: []byte(r)}, 0, 1, 2, 3)
		if rooms[p] == "" {
			rooms[p] = r
			found++
		}
	}
	return rooms
}

// Two jobs of one group split the partitions, each consuming its own;
// when one crashes the other takes its partitions over and every message
// reaches its viewers once.
func TestMembersSplitPartitionsAndTakeOver(t *testing.T) {
	e := newEnv(t, 2)
	rooms := roomPerPartition(4)
	var viewers []*viewer
	for i, r := range rooms {
		viewers = append(viewers, e.viewer(e.comets[i%2], r))
	}
	for _, r := range rooms {
		e.waitOnline(r, 1)
	}
	cfg := jobConfig()
	a := e.startJob(cfg, nil)
	b := e.startJob(cfg, nil)

	want := map[string][]string{}
	var mu sync.Mutex
	send := func(i int) {
		room := rooms[i%len(rooms)]
		ids := e.send(room, int64(i%9+1), fmt.Sprintf("c%d", i))
		mu.Lock()
		want[room] = append(want[room], ids...)
		mu.Unlock()
	}
	i := 0
	// Both members take part once the group has settled.
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		for range 8 {
			send(i)
			i++
		}
		ca := counter(t, a.reg, "danmaku_job_consumed_total")
		cb := counter(t, b.reg, "danmaku_job_consumed_total")
		if ca == 0 || cb == 0 {
			return fmt.Errorf("consumed %v and %v: the partitions are not split", ca, cb)
		}
		return nil
	})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for k := 0; k < 200; k++ {
			send(i + k)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	a.Crash() // its partitions hold messages only b can deliver now
	<-a.Done()
	<-sent
	mu.Lock()
	defer mu.Unlock()
	waitAll(t, 30*time.Second, viewers, want)
}
