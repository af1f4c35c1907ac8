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
	// position the frame carries and its epoch, and room the room whose
	// timeline they are of. Such frames may be dropped on overflow, since
	// the viewer is caught up from the room's ring.
	pos   int64
	epoch string
	room  *room
	// epochStart marks a msgs frame that begins its epoch.
	epochStart bool
	// src is the batch a shared positioned frame was encoded from, so a
	// viewer that already has its first positions gets the rest encoded
	// for it alone (see writer.next).
	src *danmaku.Batch
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
// The writer keeps, for every room of the viewer, the last position of the
// room's timeline handed to the socket (roomPos). A queue that overflows
// while the viewer is in a room does not close the writer: its msgs frames
// are dropped and every room of the viewer is behind; positioned frames of
// a room that is behind are dropped too, and when the drain has written
// what is left it asks the sink to catch the viewer up, room by room, from
// the positions it got.
//
// The zero value is an open, empty writer. Every field is guarded by mu:
// enqueuers (push handlers, the joiner, the reader, the loops) append,
// the drain goroutine takes, setGot and forget (under the room's lock)
// change rooms.
type writer struct {
	mu       sync.Mutex // guards the fields below
	queue    []item
	draining bool // a drain goroutine runs
	closed   bool
	behind   bool // some room of rooms is behind
	rooms    []roomPos
}

// roomPos is where the viewer is in one of its rooms: got is the last
// position of the room's timeline handed to the socket (or already known
// to the viewer when it joined), of epoch epoch ("" while the room had no
// timeline); behind is set while frames of the room were dropped and the
// catch-up has not yet replaced them. It is part of the writer, guarded
// by its lock.
type roomPos struct {
	r      *room
	got    int64
	epoch  string
	behind bool
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
	if w.behind && it.pos > 0 && w.behindIn(it.room) {
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
// with positions) or that later ones supersede (lossy), and marks every
// room of the viewer behind. It reports false when the viewer is in no
// room and cannot be caught up.
func (w *writer) overflowLocked() bool {
	if len(w.rooms) == 0 {
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
	for i := range w.rooms {
		w.rooms[i].behind = true
	}
	w.behind = true
	return true
}

// find returns the index of r in w.rooms, or -1.
func (w *writer) find(r *room) int {
	for i := range w.rooms {
		if w.rooms[i].r == r {
			return i
		}
	}
	return -1
}

// behindIn reports whether frames of r are being dropped for a catch-up.
func (w *writer) behindIn(r *room) bool {
	i := w.find(r)
	return i >= 0 && w.rooms[i].behind
}

// settleLocked sets behind from the rooms' flags.
func (w *writer) settleLocked() {
	w.behind = false
	for i := range w.rooms {
		w.behind = w.behind || w.rooms[i].behind
	}
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
//
// A msgs frame never hands the viewer a position of its room it already
// has: a frame wholly at or below the room's got is skipped, and one that
// starts at or below it is cut to the positions after it (encoded for
// this viewer). Such frames are rare (a viewer that resumed ahead of this
// comet's view of the room, a catch-up racing a live frame), and without
// the check they would show messages twice.
func (w *writer) next() (it item, ok, catchUp bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
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
		if it.pos == 0 {
			return it, true, false
		}
		i := w.find(it.room)
		if i < 0 {
			return it, true, false
		}
		p := &w.rooms[i]
		switch {
		case it.epochStart:
			p.got, p.epoch = it.pos, it.epoch
		case it.epoch != p.epoch:
		case it.pos <= p.got:
			continue // the viewer has every position of it
		default:
			it = it.after(p.got)
			p.got = it.pos
		}
		return it, true, false
	}
}

// after returns it without the messages at or below position got: it
// itself when it has none, else a frame of the rest for one viewer.
func (it item) after(got int64) item {
	b := it.src
	if b == nil {
		b = it.batch
	}
	if b == nil || len(b.Msgs) == 0 || b.Msgs[0].Pos > got {
		return it
	}
	k := 0
	for k < len(b.Msgs) && b.Msgs[k].Pos <= got {
		k++
	}
	rest := *b
	rest.Msgs = b.Msgs[k:]
	return item{batch: &rest, pos: it.pos, epoch: it.epoch, room: it.room}
}

// setGot records, when the viewer joins room r, the position it has in r
// once the frames queued so far are written; r's lock is held, so no live
// frame of the room can come between.
func (w *writer) setGot(r *room, epoch string, pos int64) {
	w.mu.Lock()
	p := roomPos{r: r, got: pos, epoch: epoch}
	if i := w.find(r); i >= 0 {
		w.rooms[i] = p
	} else {
		w.rooms = append(w.rooms, p)
	}
	w.settleLocked()
	w.mu.Unlock()
}

// forget drops r from the viewer's rooms (it left r); r's lock is held.
func (w *writer) forget(r *room) {
	w.mu.Lock()
	if i := w.find(r); i >= 0 {
		last := len(w.rooms) - 1
		w.rooms[i] = w.rooms[last]
		w.rooms[last] = roomPos{}
		w.rooms = w.rooms[:last]
		if last == 0 {
			w.rooms = nil
		}
		w.settleLocked()
	}
	w.mu.Unlock()
}

// behindRooms returns the rooms waiting for a catch-up.
func (w *writer) behindRooms() []*room {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*room
	for _, p := range w.rooms {
		if p.behind {
			out = append(out, p.r)
		}
	}
	return out
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
	w.rooms = nil
}

// isClosed reports whether markClosed was called (or the drain ended the
// writer).
func (w *writer) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}
