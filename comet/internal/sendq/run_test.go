package sendq

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku/internal/testkit"
)

// runSink records the calls a drain makes: the sizes of each frame
// written alone or in a run. The first write waits for gate.
type runSink struct {
	mu      sync.Mutex
	calls   []string
	gate    chan struct{}
	started chan struct{}
}

func (s *runSink) CatchUp() {}

func (s *runSink) WriteFrame(it item) bool { return s.record([]item{it}) }

func (s *runSink) WriteFrames(its []item) bool { return s.record(its) }

func (s *runSink) record(its []item) bool {
	if s.gate != nil {
		s.started <- struct{}{}
		<-s.gate
		s.gate = nil
	}
	var sizes []int
	for _, it := range its {
		sizes = append(sizes, it.Size)
	}
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprint(sizes))
	s.mu.Unlock()
	return true
}

func (s *runSink) written() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.calls)
}

// Prepared frames queued behind the one being written go to a RunSink
// together, at most maxRun at a time; a frame of another kind goes
// alone.
func TestWriterHandsRunsToARunSink(t *testing.T) {
	var w writer
	s := &runSink{gate: make(chan struct{}), started: make(chan struct{}, 1)}
	pm := &websocket.PreparedMessage{}
	w.Enqueue(item{PM: pm, Size: 1}, 64, s)
	<-s.started // frame 1 is being written
	for i := 2; i <= 12; i++ {
		w.Enqueue(item{PM: pm, Size: i}, 64, s)
	}
	w.Enqueue(item{Ping: true, Size: 13}, 64, s)
	w.Enqueue(item{PM: pm, Size: 14}, 64, s)
	w.Enqueue(item{Close: []byte{3, 232}, Size: 15}, 64, s)
	close(s.gate)
	want := "[[1] [2 3 4 5 6 7 8 9] [10 11 12] [13] [14] [15]]"
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if got := s.written(); got != want {
			return fmt.Errorf("written %s, want %s", got, want)
		}
		return nil
	})
}

// stage queues without starting a drain: the first frame reports the
// drain owed, later ones do not, and nothing is written before start.
func TestWriterStage(t *testing.T) {
	var w writer
	r := newRecordSink()
	for i := 1; i <= 3; i++ {
		res, start := w.stage(item{Size: i}, 16)
		if res != enqueued || start != (i == 1) {
			t.Fatalf("stage %d = %v, start %v", i, res, start)
		}
	}
	if res := w.Enqueue(item{Size: 4}, 16, r); res != enqueued {
		t.Fatalf("enqueue behind staged frames = %v", res)
	}
	time.Sleep(20 * time.Millisecond)
	if got := r.sizes(); len(got) != 0 {
		t.Fatalf("written %v before start", got)
	}
	w.start(r)
	waitWritten(t, r, []int{1, 2, 3, 4})
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return idle(&w) })
	w.MarkClosed()
	if res, start := w.stage(item{Size: 5}, 16); res != connClosed || start {
		t.Fatalf("stage on a closed writer = %v, start %v", res, start)
	}
}
