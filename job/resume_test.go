package job

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku/internal/config"
)

// A new generation starts each partition past the records this member
// finished but could not commit, commits them in that generation, and
// never sends a queued commit that would move a partition back or name a
// partition that is another member's now.
func TestResumeAtFinishedOffsets(t *testing.T) {
	c := newConsumer(DefaultConfig(), config.Kafka{Topic: "t"}, zap.NewNop(),
		newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }))
	// Finished here, commits failed: 0 past the group's commit, 1 behind
	// it (another member went further), 2 on a log the group has no commit
	// for, 3 not assigned any more.
	c.toCommit = map[int]int64{0: 50, 1: 5, 2: 30, 3: 40}
	starts := c.resumeAt(&kafka.Generation{}, []kafka.PartitionAssignment{
		{ID: 0, Offset: 10}, {ID: 1, Offset: 10}, {ID: 2, Offset: kafka.FirstOffset}})
	if want := map[int]int64{0: 50, 1: 10, 2: kafka.FirstOffset}; !maps.Equal(starts, want) {
		t.Errorf("starts %v, want %v", starts, want)
	}
	if want := map[int]int64{0: 50}; !maps.Equal(c.toCommit, want) {
		t.Errorf("queued %v, want %v", c.toCommit, want)
	}
	select {
	case <-c.wake:
	default:
		t.Error("the commit loop was not woken for the carried-over commit")
	}
	// Commits queued later (a delivery of the last generation finishing)
	// are sent only for this generation's partitions, forward.
	pending := map[int]int64{0: 60, 1: 9, 2: 7, 3: 99}
	c.dropUnsendable(pending, false)
	if want := map[int]int64{0: 60, 2: 7}; !maps.Equal(pending, want) {
		t.Errorf("sent %v, want %v", pending, want)
	}
}
