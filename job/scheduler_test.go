package job

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
)

// A lane of notices whose delivery failed waits out its backoff: notices
// arriving meanwhile queue behind it and do not make it due at once, or
// every notice during an outage would retry the whole lane.
func TestNewNoticesKeepTheBackoff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RetryMin, cfg.RetryMax = time.Second, 4*time.Second
	work := make(chan *delivery, cfg.Workers)
	s := &scheduler{cfg: cfg, m: newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }), work: work,
		rooms: map[string]*roomState{}, heads: map[string]knownHead{}, offsets: newOffsets()}
	notice := func(off int64) record {
		return record{env: danmaku.Envelope{V: 3, All: true, Notice: &danmaku.Notice{ID: "n" + string(rune('a'+off))}}, off: off}
	}
	now := time.Now()
	s.accept(notice(1), now)
	s.promote(now)
	s.dispatchReady(now)
	d := <-work
	s.complete(outcome{room: d.room, retry: d.msgs, failed: true}, now)
	r := s.rooms[d.room]
	if want := now.Add(cfg.RetryMin); !r.due.Equal(want) {
		t.Fatalf("after the failure the lane is due at %v, want %v", r.due.Sub(now), cfg.RetryMin)
	}
	later := now.Add(10 * time.Millisecond)
	s.accept(notice(2), later)
	if want := now.Add(cfg.RetryMin); !r.due.Equal(want) {
		t.Fatalf("a new notice made the failing lane due %v after the failure, want %v (its backoff)", r.due.Sub(now), cfg.RetryMin)
	}
}
