package sendq

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
)

// The tests queue frames of testRooms.
type (
	room   struct{ id string }
	item   = Item[*room]
	writer = Writer[*room]
)

const (
	enqueued   = Enqueued
	queueFull  = QueueFull
	connClosed = ConnClosed
)

// recordSink records the sizes of the frames written to it. While gate is
// set, every write waits for a value on it; stopAt makes the write of the
// frame with that size report the end.
type recordSink struct {
	mu      sync.Mutex
	written []int
	gate    chan struct{}
	stopAt  int
	started chan struct{} // receives once per write, when it begins
}

func newRecordSink() *recordSink {
	return &recordSink{stopAt: -1, started: make(chan struct{}, 1024)}
}

func (r *recordSink) CatchUp() {}

func (r *recordSink) WriteFrame(it item) bool {
	r.started <- struct{}{}
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written = append(r.written, it.Size)
	return it.Size != r.stopAt
}

func (r *recordSink) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.written...)
}

// idle reports whether w has no drain goroutine and holds no queue.
func idle(w *writer) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.draining || len(w.queue) != 0 {
		return fmt.Errorf("draining %v with %d queued", w.draining, len(w.queue))
	}
	return nil
}

func waitWritten(t *testing.T, r *recordSink, want []int) {
	t.Helper()
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if got := r.sizes(); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("written %v, want %v", got, want)
		}
		return nil
	})
}

// Frames are written in order by a drain goroutine that ends once the
// queue is empty and leaves no burst-sized queue behind; the next frame
// starts a new one.
func TestWriterDrainsInOrderThenIdles(t *testing.T) {
	var w writer
	r := newRecordSink()
	r.gate = make(chan struct{})
	for i := 1; i <= 8; i++ {
		if res := w.Enqueue(item{Size: i}, 16, r); res != enqueued {
			t.Fatalf("enqueue %d = %v", i, res)
		}
	}
	close(r.gate) // let every write through
	waitWritten(t, r, []int{1, 2, 3, 4, 5, 6, 7, 8})
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return idle(&w) })
	if w.queue != nil {
		t.Fatalf("idle writer keeps a queue of capacity %d", cap(w.queue))
	}
	if res := w.Enqueue(item{Size: 9}, 16, r); res != enqueued {
		t.Fatalf("enqueue after idle = %v", res)
	}
	waitWritten(t, r, []int{1, 2, 3, 4, 5, 6, 7, 8, 9})
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return idle(&w) })
	if w.IsClosed() {
		t.Fatal("writer closed after ordinary frames")
	}
}

// A queue holding limit frames refuses the next one with queueFull and
// closes the writer: what was queued is dropped, later frames are refused
// with connClosed, and the frame being written when it overflowed
// completes.
func TestWriterFullQueueCloses(t *testing.T) {
	var w writer
	r := newRecordSink()
	r.gate = make(chan struct{}, 16)
	const limit = 3
	w.Enqueue(item{Size: 1}, limit, r)
	<-r.started // frame 1 is being written, the queue is empty again
	for i := 2; i < 2+limit; i++ {
		if res := w.Enqueue(item{Size: i}, limit, r); res != enqueued {
			t.Fatalf("enqueue %d = %v, want enqueued", i, res)
		}
	}
	if res := w.Enqueue(item{Size: 99}, limit, r); res != queueFull {
		t.Fatalf("enqueue past the limit = %v, want queueFull", res)
	}
	if !w.IsClosed() {
		t.Fatal("writer open after its queue overflowed")
	}
	if res := w.Enqueue(item{Size: 100}, limit, r); res != connClosed {
		t.Fatalf("enqueue after close = %v, want connClosed", res)
	}
	r.gate <- struct{}{}
	waitWritten(t, r, []int{1})
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return idle(&w) })
}

// A sink reporting the end (a close frame written, or a failed write)
// closes the writer and drops what was queued behind it.
func TestWriterSinkEndCloses(t *testing.T) {
	var w writer
	r := newRecordSink()
	r.gate = make(chan struct{})
	r.stopAt = 2
	for i := 1; i <= 4; i++ {
		w.Enqueue(item{Size: i}, 16, r)
	}
	close(r.gate)
	waitWritten(t, r, []int{1, 2})
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if !w.IsClosed() {
			return errors.New("writer still open")
		}
		return idle(&w)
	})
	if res := w.Enqueue(item{Size: 5}, 16, r); res != connClosed {
		t.Fatalf("enqueue after the end = %v, want connClosed", res)
	}
	time.Sleep(10 * time.Millisecond)
	waitWritten(t, r, []int{1, 2})
}

// MarkClosed from another goroutine lets the write in progress finish and
// drops the rest.
func TestWriterMarkClosed(t *testing.T) {
	var w writer
	r := newRecordSink()
	r.gate = make(chan struct{})
	for i := 1; i <= 4; i++ {
		w.Enqueue(item{Size: i}, 16, r)
	}
	<-r.started
	w.MarkClosed()
	w.MarkClosed() // twice is the same as once
	close(r.gate)
	waitWritten(t, r, []int{1})
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return idle(&w) })
	if res := w.Enqueue(item{Size: 5}, 16, r); res != connClosed {
		t.Fatalf("enqueue after markClosed = %v, want connClosed", res)
	}
}

// Many goroutines enqueue at once: every frame is written exactly once,
// each goroutine's frames in the order it queued them, and at most one
// drain goroutine writes at a time.
func TestWriterConcurrentEnqueue(t *testing.T) {
	var w writer
	r := &concurrencySink{}
	const producers, each = 8, 200
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if w.Enqueue(item{Size: p*each + i}, producers*each, r) != enqueued {
					t.Error("writer closed")
					return
				}
			}
		}()
	}
	wg.Wait()
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if n := r.count(); n != producers*each {
			return fmt.Errorf("%d of %d frames written", n, producers*each)
		}
		return idle(&w)
	})
	if r.overlap {
		t.Fatal("two drain goroutines wrote at once")
	}
	last := map[int]int{}
	for _, size := range r.written {
		p := size / each
		if prev, ok := last[p]; ok && size <= prev {
			t.Fatalf("producer %d: frame %d written after %d", p, size, prev)
		}
		last[p] = size
	}
}

// concurrencySink records frames and notices overlapping writes.
type concurrencySink struct {
	mu      sync.Mutex
	busy    bool
	overlap bool
	written []int
}

func (c *concurrencySink) CatchUp() {}

func (c *concurrencySink) WriteFrame(it item) bool {
	c.mu.Lock()
	if c.busy {
		c.overlap = true
	}
	c.busy = true
	c.mu.Unlock()
	time.Sleep(time.Microsecond)
	c.mu.Lock()
	c.busy = false
	c.written = append(c.written, it.Size)
	c.mu.Unlock()
	return true
}

func (c *concurrencySink) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.written)
}

// A viewer never gets a position of its room twice: a shared frame wholly
// at or below what it has is skipped, and one that starts at or below it
// is cut to the positions after it.
func TestWriterSkipsPositionsTheViewerHas(t *testing.T) {
	var w writer
	r := &room{id: "r"}
	frame := func(first, last int64) item {
		var msgs []danmaku.Message
		for p := first; p <= last; p++ {
			msgs = append(msgs, danmaku.Message{ID: fmt.Sprint(p), Pos: p})
		}
		// A shared positioned frame as the comet encodes it (the encoded
		// form itself does not matter here).
		b := danmaku.Batch{Op: danmaku.OpMsgs, Room: "r", Epoch: "e", Msgs: msgs}
		return item{Pos: last, Epoch: "e", Room: r, Src: &b}
	}
	w.SetGot(r, "e", 15)
	sink := &posSink{}
	w.queue = []item{frame(5, 12), frame(11, 20), frame(21, 22)}
	w.draining = true
	w.drain(sink)
	if want := "[16 17 18 19 20] [21 22]"; fmt.Sprint(sink.frames) != "["+want+"]" {
		t.Fatalf("written %v, want [%s]", sink.frames, want)
	}
}

// posSink records the positions of each msgs frame written.
type posSink struct{ frames [][]int64 }

func (s *posSink) CatchUp() {}

func (s *posSink) WriteFrame(it item) bool {
	b := it.Batch
	if b == nil {
		b = it.Src
	}
	var ps []int64
	for _, m := range b.Msgs {
		ps = append(ps, m.Pos)
	}
	s.frames = append(s.frames, ps)
	return true
}

// WriteIdle runs its write only while the writer is idle (open, nothing
// queued, no drain), and no drain starts while the write runs.
func TestWriterWriteIdle(t *testing.T) {
	var w writer
	r := newRecordSink()
	ran := 0
	write := func() bool { ran++; return true }
	if !w.WriteIdle(write) || ran != 1 {
		t.Fatalf("idle writer: write ran %d times, want 1", ran)
	}
	if w.WriteIdle(func() bool { return false }) {
		t.Fatal("WriteIdle reported done for a write that did not happen")
	}
	r.gate = make(chan struct{})
	w.Enqueue(item{Size: 1}, 16, r)
	<-r.started // the drain is writing
	if w.WriteIdle(write) || ran != 1 {
		t.Fatalf("writer with a drain running: write ran %d times, want 1", ran)
	}
	close(r.gate)
	waitWritten(t, r, []int{1})
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return idle(&w) })
	// A frame enqueued while the write runs waits for it.
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan bool)
	go func() {
		done <- w.WriteIdle(func() bool { close(entered); <-release; return true })
	}()
	<-entered
	queued := make(chan Result)
	go func() { queued <- w.Enqueue(item{Size: 2}, 16, r) }()
	select {
	case res := <-queued:
		t.Fatalf("enqueue during the idle write returned %v before it ended", res)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if !<-done || <-queued != enqueued {
		t.Fatal("idle write or the enqueue after it failed")
	}
	waitWritten(t, r, []int{1, 2})
	w.MarkClosed()
	if w.WriteIdle(write) || ran != 1 {
		t.Fatalf("closed writer: write ran %d times, want 1", ran)
	}
}
