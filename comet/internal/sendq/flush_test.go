package sendq

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
)

// flushSink writes frames that do not wait (TryWriteFrame) by size: the
// size in blockAt is taken in part (Blocked) and finished by FinishFrame,
// the size in failAt fails, and a frame with Ping set is not tried. It
// records every write as "try N", "finish", "wait N" in order, and which
// goroutine kinds wrote (the flusher's writes are "try").
type flushSink struct {
	mu      sync.Mutex
	log     []string
	blockAt int
	failAt  int
}

func (s *flushSink) add(e string) {
	s.mu.Lock()
	s.log = append(s.log, e)
	s.mu.Unlock()
}

func (s *flushSink) events() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.log)
}

func (s *flushSink) CatchUp() {}

func (s *flushSink) WriteFrame(it item) bool {
	s.add(fmt.Sprint("wait ", it.Size))
	return true
}

func (s *flushSink) TryWriteFrame(it item) Try {
	switch {
	case it.Ping:
		return NotTried
	case it.Size == s.failAt:
		s.add(fmt.Sprint("fail ", it.Size))
		return Failed
	case it.Size == s.blockAt:
		s.add(fmt.Sprint("part ", it.Size))
		return Blocked
	}
	s.add(fmt.Sprint("try ", it.Size))
	return Written
}

func (s *flushSink) FinishFrame() bool {
	s.add("finish")
	return true
}

// Stage queues without starting a drain; Flush then writes the queue in
// order from the caller's goroutine with sends that do not wait, and
// leaves the writer idle.
func TestStageThenFlushWritesInOrder(t *testing.T) {
	var w writer
	s := &flushSink{blockAt: -1, failAt: -1}
	for i := 1; i <= 3; i++ {
		if res := w.Stage(item{Size: i}, 16); res != enqueued {
			t.Fatalf("stage %d = %v", i, res)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if got := s.events(); got != "[]" {
		t.Fatalf("staged frames written before Flush: %s", got)
	}
	w.Flush(s)
	if got, want := s.events(), "[try 1 try 2 try 3]"; got != want {
		t.Fatalf("Flush wrote %s, want %s", got, want)
	}
	if err := idle(&w); err != nil {
		t.Fatal(err)
	}
	w.Flush(s) // nothing queued: nothing written
	if got := s.events(); got != "[try 1 try 2 try 3]" {
		t.Fatalf("second Flush wrote: %s", got)
	}
}

// A frame the socket takes only in part is finished by a drain, which
// then writes what follows it; a frame that needs a write that may wait
// goes to a drain too, still in order.
func TestFlushHandsTheRestToADrain(t *testing.T) {
	var w writer
	s := &flushSink{blockAt: 2, failAt: -1}
	w.Stage(item{Size: 1}, 16)
	w.Stage(item{Size: 2}, 16)
	w.Stage(item{Size: 3}, 16)
	w.Flush(s)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if got, want := s.events(), "[try 1 part 2 finish wait 3]"; got != want {
			return fmt.Errorf("written %s, want %s", got, want)
		}
		return idle(&w)
	})

	var w2 writer
	s2 := &flushSink{blockAt: -1, failAt: -1}
	w2.Stage(item{Size: 1}, 16)
	w2.Stage(item{Size: 2, Ping: true}, 16)
	w2.Stage(item{Size: 3}, 16)
	w2.Flush(s2)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if got, want := s2.events(), "[try 1 wait 2 wait 3]"; got != want {
			return fmt.Errorf("written %s, want %s", got, want)
		}
		return idle(&w2)
	})
}

// A failed send closes the writer: nothing after it is written.
func TestFlushFailureCloses(t *testing.T) {
	var w writer
	s := &flushSink{blockAt: -1, failAt: 2}
	for i := 1; i <= 3; i++ {
		w.Stage(item{Size: i}, 16)
	}
	w.Flush(s)
	if got, want := s.events(), "[try 1 fail 2]"; got != want {
		t.Fatalf("written %s, want %s", got, want)
	}
	if !w.IsClosed() {
		t.Fatal("writer open after a failed send")
	}
	if res := w.Stage(item{Size: 4}, 16); res != connClosed {
		t.Fatalf("stage after the failure = %v, want connClosed", res)
	}
}

// An Enqueue behind staged frames starts a drain that writes them all, in
// order; a Flush while that drain runs writes nothing itself.
func TestEnqueueAfterStageDrainsEverything(t *testing.T) {
	var w writer
	r := newRecordSink()
	r.gate = make(chan struct{})
	w.Stage(item{Size: 1}, 16)
	w.Stage(item{Size: 2}, 16)
	w.Enqueue(item{Size: 3}, 16, r)
	<-r.started // the drain writes frame 1
	s := &flushSink{blockAt: -1, failAt: -1}
	w.Flush(s)
	if got := s.events(); got != "[]" {
		t.Fatalf("Flush wrote while a drain ran: %s", got)
	}
	close(r.gate)
	waitWritten(t, r, []int{1, 2, 3})
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return idle(&w) })
}

// A staged queue that overflows marks the viewer behind without a drain
// running; the next Flush starts the catch-up.
func TestFlushCatchesUpAStagedOverflow(t *testing.T) {
	var w writer
	rm := &room{id: "r"}
	w.SetGot(rm, "e", 0)
	for i := 1; i <= 3; i++ {
		if res := w.Stage(item{Size: i, Pos: int64(i), Epoch: "e", Room: rm}, 2); res != enqueued {
			t.Fatalf("stage %d = %v", i, res)
		}
	}
	s := &catchUpSink{w: &w}
	w.Flush(s)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if s.caughtUp() == 0 {
			return fmt.Errorf("no catch-up")
		}
		return idle(&w)
	})
}

// catchUpSink counts catch-ups and settles the writer's rooms.
type catchUpSink struct {
	waitingWrites
	w  *writer
	mu sync.Mutex
	n  int
}

func (c *catchUpSink) WriteFrame(item) bool { return true }

func (c *catchUpSink) CatchUp() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	for _, r := range c.w.BehindRooms() {
		c.w.CatchUpRoom(r, func(string, int64) ([]item, bool) { return nil, true })
	}
}

func (c *catchUpSink) caughtUp() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
