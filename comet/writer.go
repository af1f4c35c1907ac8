package comet

import (
	"sync"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// item is one entry of a viewer's send queue: a prepared frame, a batch
// encoded for this viewer only when it is written, or a ping, pong or
// close control frame.
type item struct {
	pm    *websocket.PreparedMessage
	batch *danmaku.Batch // encoded by the writer (a replay for one viewer)
	size  int            // payload bytes of pm, for the metrics
	ping  bool           // a ping control frame
	pong  []byte         // a pong control frame with this payload
	close []byte         // a close control frame with this payload
	// lossy frames (pings, online counts) may be dropped when the queue
	// overflows; a later one supersedes them.
	lossy bool
	// pos and epoch are set on msgs frames with positions: the last
	// position the frame carries and its epoch. Such frames may be dropped
	// on overflow, since the viewer is caught up from the room's ring.
	pos   int64
	epoch string
	// epochStart marks a msgs frame that begins its epoch.
	epochStart bool
}

var pingItem = item{ping: true, lossy: true}

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
	// catchUp is called by the drain once the queue is empty while the
	// writer is behind: it queues the missed messages (catchUpLocked) or
	// disconnects the viewer.
	catchUp()
}

// writer is a viewer's bounded send queue. Any goroutine hands it frames
// without blocking (enqueue); a drain goroutine writes them to the sink
// and exits as soon as the queue is empty, so an idle viewer has no
// goroutine and no queue storage here. A writer starts open; once closed
// (markClosed) it drops what is queued and refuses everything after.
//
// A queue that overflows while the viewer's position is known (got) does
// not close the writer: its msgs frames are dropped and the writer is
// behind; positioned frames arriving meanwhile are dropped too, and when
// the drain has written what is left it asks the sink to catch the viewer
// up from the position it got.
//
// The zero value is an open, empty writer.
type writer struct {
	mu       sync.Mutex // guards the fields below
	queue    []item
	draining bool // a drain goroutine runs
	closed   bool
	behind   bool
	// got is the last position of the room's timeline handed to the
	// socket (or already known to the viewer when it joined), of epoch
	// gotEpoch; "" when the room has no positions (overflow then closes).
	got      int64
	gotEpoch string
}

// enqueue queues it and starts a drain goroutine writing to sink if none
// runs. A queue already holding limit frames closes the writer and
// reports queueFull, unless the viewer can be caught up (see writer).
func (w *writer) enqueue(it item, limit int, sink frameSink) enqueueResult {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return connClosed
	}
	if len(w.queue) >= limit && !w.overflowLocked() {
		w.markClosedLocked()
		w.mu.Unlock()
		return queueFull
	}
	if w.behind && it.pos > 0 {
		w.mu.Unlock()
		return enqueued // the catch-up carries it
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

// overflowLocked drops the queued frames a catch-up replaces (msgs frames
// with positions) or that later ones supersede (lossy), and marks the
// writer behind. It reports false when the viewer cannot be caught up.
func (w *writer) overflowLocked() bool {
	if w.gotEpoch == "" {
		return false
	}
	kept := w.queue[:0]
	for _, q := range w.queue {
		if q.pos == 0 && !q.lossy {
			kept = append(kept, q)
		}
	}
	clear(w.queue[len(kept):])
	w.queue = kept
	w.behind = true
	return true
}

// drain writes queued frames to sink until the queue is empty, the writer
// closed, or sink reported the end; in the last case it closes the writer.
func (w *writer) drain(sink frameSink) {
	for {
		it, ok, catchUp := w.next()
		if catchUp {
			sink.catchUp()
			continue
		}
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

// next takes the oldest queued frame. With none left it reports catchUp
// when the writer is behind (the drain goes on), else it ends the drain
// and reports false, as it does for a closed writer.
func (w *writer) next() (it item, ok, catchUp bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 && w.behind && !w.closed {
		return item{}, false, true
	}
	if len(w.queue) == 0 || w.closed {
		w.draining = false
		if cap(w.queue) > 4 {
			w.queue = nil // an idle viewer keeps no burst-sized queue
		}
		return item{}, false, false
	}
	it = w.queue[0]
	n := copy(w.queue, w.queue[1:])
	w.queue[n] = item{}
	w.queue = w.queue[:n]
	switch {
	case it.pos == 0:
	case it.epochStart:
		w.got, w.gotEpoch = it.pos, it.epoch
	case it.epoch == w.gotEpoch:
		w.got = max(w.got, it.pos)
	}
	return it, true, false
}

// setGot records, when the viewer joins a room, the position it has
// once the frames queued so far are written; the room's lock is held, so
// no live frame of the room can come between.
func (w *writer) setGot(epoch string, pos int64) {
	w.mu.Lock()
	w.got, w.gotEpoch, w.behind = pos, epoch, false
	w.mu.Unlock()
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
	w.behind = false
	w.queue = nil
}

// isClosed reports whether markClosed was called (or the drain ended the
// writer).
func (w *writer) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}
