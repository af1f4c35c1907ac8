package comet

import (
	"sync"

	"github.com/gorilla/websocket"
)

// item is one entry of a viewer's send queue: a prepared frame, or a ping,
// pong or close control frame.
type item struct {
	pm    *websocket.PreparedMessage
	size  int    // payload bytes of pm, for the metrics
	ping  bool   // a ping control frame
	pong  []byte // a pong control frame with this payload
	close []byte // a close control frame with this payload
}

var pingItem = item{ping: true}

// enqueueResult is what happened to a frame handed to a writer.
type enqueueResult uint8

const (
	enqueued   enqueueResult = iota
	queueFull                // the writer is now closed: the caller disconnects the viewer
	connClosed               // the writer was already closed; the frame is dropped
)

// frameSink writes the frames a writer drains, one at a time, in order.
type frameSink interface {
	// writeFrame writes it to the socket. It reports false when nothing more
	// is to be written: it was a close frame, or the write failed.
	writeFrame(it item) bool
}

// writer is a viewer's bounded send queue. Any goroutine hands it frames
// without blocking (enqueue); a drain goroutine writes them to the sink
// and exits as soon as the queue is empty, so an idle viewer has no
// goroutine and no queue storage here. A writer starts open; once closed
// (markClosed) it drops what is queued and refuses everything after.
//
// The zero value is an open, empty writer.
type writer struct {
	mu       sync.Mutex // guards the fields below
	queue    []item
	draining bool // a drain goroutine runs
	closed   bool
}

// enqueue queues it and starts a drain goroutine writing to sink if none
// runs. A queue already holding limit frames closes the writer instead
// and reports queueFull.
func (w *writer) enqueue(it item, limit int, sink frameSink) enqueueResult {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return connClosed
	}
	if len(w.queue) >= limit {
		w.markClosedLocked()
		w.mu.Unlock()
		return queueFull
	}
	w.queue = append(w.queue, it)
	start := !w.draining
	w.draining = true
	w.mu.Unlock()
	if start {
		go w.drain(sink)
	}
	return enqueued
}

// drain writes queued frames to sink until the queue is empty, the writer
// closed, or sink reported the end; in the last case it closes the writer.
func (w *writer) drain(sink frameSink) {
	for {
		it, ok := w.next()
		if !ok {
			return
		}
		if !sink.writeFrame(it) {
			w.mu.Lock()
			w.markClosedLocked()
			w.draining = false
			w.mu.Unlock()
			return
		}
	}
}

// next takes the oldest queued frame. With none left, or the writer
// closed, it ends the drain and reports false.
func (w *writer) next() (item, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 || w.closed {
		w.draining = false
		if cap(w.queue) > 4 {
			w.queue = nil // an idle viewer keeps no burst-sized queue
		}
		return item{}, false
	}
	it := w.queue[0]
	n := copy(w.queue, w.queue[1:])
	w.queue[n] = item{}
	w.queue = w.queue[:n]
	return it, true
}

// markClosed closes the writer: queued frames are dropped and new ones
// refused. A frame being written when it is called still completes.
func (w *writer) markClosed() {
	w.mu.Lock()
	w.markClosedLocked()
	w.mu.Unlock()
}

func (w *writer) markClosedLocked() {
	w.closed = true
	w.queue = nil
}

// isClosed reports whether markClosed was called (or the drain ended the
// writer).
func (w *writer) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}
