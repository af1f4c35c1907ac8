package job

import (
	"fmt"
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

// One wake-up takes every slice the consumer has ready, records in the
// order they came, until the buffer is full; a closed channel is reported.
func TestAcceptReadyTakesWhatIsReady(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxPending, cfg.MaxBuffered = 10, 5
	cfg.Budget = 5
	s := &scheduler{cfg: cfg, m: newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }),
		rooms: map[string]*roomState{}, heads: map[string]knownHead{}, offsets: newOffsets()}
	msg := func(off int64) record {
		return record{env: danmaku.Envelope{V: 1, Room: "r", Msg: danmaku.Message{ID: "m" + string(rune('a'+off))}}, part: 2, off: off}
	}
	in := make(chan []record, 4)
	in <- []record{msg(2), msg(3)}
	in <- []record{msg(4), msg(5)}
	in <- []record{msg(6)}
	if !s.acceptReady([]record{msg(0), msg(1)}, in, time.Now()) {
		t.Fatal("acceptReady reported a closed channel")
	}
	if s.buffered != 6 || len(in) != 1 {
		t.Fatalf("buffered %d with %d slices left, want 6 (it stops once full) and 1", s.buffered, len(in))
	}
	for i, p := range s.rooms["r"].queue {
		if p.off != int64(i) {
			t.Fatalf("queue[%d] is offset %d: order lost", i, p.off)
		}
	}
	s.buffered = 0
	close(in)
	if s.acceptReady(nil, in, time.Now()) {
		t.Fatal("acceptReady did not report the closed channel")
	}
	if n := len(s.rooms["r"].queue); n != 7 {
		t.Fatalf("queue holds %d, want 7", n)
	}
}

// After a rebalance the messages fetched in the member's earlier
// generation are dropped, whether queued, held, still on their way from
// the consumer or back from a failed delivery: the partitions still this
// member's are fetched again, the others are another member's.
func TestNewGenerationDropsEarlierMessages(t *testing.T) {
	cfg := DefaultConfig()
	work := make(chan *delivery, cfg.Workers)
	var gen int64 = 1
	s := &scheduler{cfg: cfg, m: newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }), work: work,
		rooms: map[string]*roomState{}, heads: map[string]knownHead{}, offsets: newOffsets(),
		generation: func() int64 { return gen }}
	msg := func(room string, off, g int64, holdMs int64) record {
		return record{env: danmaku.Envelope{V: 1, Room: room, HoldMs: holdMs, Msg: danmaku.Message{ID: fmt.Sprint("m", off), TS: time.Now().UnixMilli()}},
			part: 1, off: off, gen: g}
	}
	now := time.Now()
	s.accept(msg("a", 1, 1, 0), now)
	s.accept(msg("b", 2, 1, 0), now)
	s.accept(msg("c", 3, 1, 60_000), now) // held for a minute
	s.promote(now)
	s.dispatchReady(now) // a and b go out
	d := <-work
	<-work
	s.accept(msg("a", 4, 1, 0), now) // queued behind a's delivery
	if s.buffered != 4 || s.heldN != 1 {
		t.Fatalf("buffered %d, held %d, want 4 and 1", s.buffered, s.heldN)
	}
	gen = 2
	s.dispatchReady(now)
	if s.buffered != 2 || s.heldN != 0 || len(s.rooms["a"].queue) != 0 {
		t.Fatalf("after the rebalance buffered %d (the two in flight), held %d, a's queue %d: want 2, 0, 0",
			s.buffered, s.heldN, len(s.rooms["a"].queue))
	}
	s.complete(outcome{room: d.room, retry: d.msgs, failed: true}, now) // a failed delivery of generation 1
	s.accept(msg("a", 1, 1, 0), now)                                    // fetched before the rebalance, handed over after
	if q := s.rooms[d.room].queue; len(q) != 0 {
		t.Fatalf("%s's queue holds %d messages of generation 1", d.room, len(q))
	}
	s.accept(msg("a", 1, 2, 0), now) // fetched again
	if q := s.rooms["a"].queue; len(q) != 1 || q[0].gen != 2 {
		t.Fatalf("a's queue %v, want the message fetched again", q)
	}
	if s.buffered != 2 {
		t.Fatalf("buffered %d, want 2 (b in flight, a fetched again)", s.buffered)
	}
}
