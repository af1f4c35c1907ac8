// Package sendq is a viewer's bounded send queue and the bookkeeping that
// lets an overflowing viewer be caught up instead of cut: the position it
// has in each of its rooms. R is the comet's room (anything comparable);
// the queue never looks inside it.
package sendq

import (
	"sync"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// Item is one entry of a viewer's send queue: a prepared frame, a batch
// encoded for this viewer only when it is written, or a ping, pong or
// close control frame. An Item is a value: whoever builds it (a push
// handler, the joiner, a loop) fills it before handing it over, and
// nothing changes it once queued.
type Item[R comparable] struct {
	PM    *websocket.PreparedMessage
	Batch *danmaku.Batch // encoded by the writer (a replay for one viewer)
	Size  int            // payload bytes of PM, for the metrics
	Ping  bool           // a ping control frame
	Pong  []byte         // a pong control frame with this payload
	Close []byte         // a close control frame with this payload
	// Lossy frames (pings, online counts) may be dropped when the queue
	// overflows; a later one supersedes them.
	Lossy bool
	// Pos and Epoch are set on msgs frames with positions: the last
	// position the frame carries and its epoch, and Room the room whose
	// timeline they are of. Such frames may be dropped on overflow, since
	// the viewer is caught up from the room's ring.
	Pos   int64
	Epoch string
	Room  R
	// EpochStart marks a msgs frame that begins its epoch.
	EpochStart bool
	// Src is the batch a shared positioned frame was encoded from, so a
	// viewer that already has its first positions gets the rest encoded
	// for it alone (see Writer.next).
	Src *danmaku.Batch
	// Live is when a live msgs frame was handed to the room's viewers
	// (UnixNano; 0 for any other frame), and High whether it carries a
	// high-priority message: the comet measures the fan-out's lag from it.
	Live int64
	High bool
}

// Result is what happened to a frame handed to a writer.
type Result uint8

// Results of Enqueue.
const (
	Enqueued   Result = iota // queued
	QueueFull                // the writer is now closed: the caller disconnects the viewer
	ConnClosed               // the writer was already closed; the frame is dropped
)

// Sink writes the frames a writer drains, one at a time, in order.
type Sink[R comparable] interface {
	// WriteFrame writes it to the socket. It reports false when nothing more
	// is to be written: it was a close frame, or the write failed.
	WriteFrame(it Item[R]) bool
	// CatchUp is called by the drain once the queue is empty while the
	// writer is behind: it queues the missed messages (Writer.CatchUpRoom) or
	// disconnects the viewer.
	CatchUp()
}

// Writer is a viewer's bounded send queue. Any goroutine hands it frames
// without blocking (Enqueue); a drain writes them to the sink on a worker
// of the drain pool (pool.go) and ends as soon as the queue is empty, so
// an idle viewer has no goroutine and no queue storage here. A writer starts open; once closed
// (MarkClosed) it drops what is queued and refuses everything after.
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
// the drain goroutine takes, SetGot and Forget (under the room's lock)
// change rooms.
type Writer[R comparable] struct {
	mu       sync.Mutex // guards the fields below
	queue    []Item[R]
	draining bool // a drain goroutine runs
	closed   bool
	behind   bool // some room of rooms is behind
	rooms    []roomPos[R]
}

// roomPos is where the viewer is in one of its rooms: got is the last
// position of the room's timeline handed to the socket (or already known
// to the viewer when it joined), of epoch epoch ("" while the room had no
// timeline); behind is set while frames of the room were dropped and the
// catch-up has not yet replaced them. It is part of the writer, guarded
// by its lock.
type roomPos[R comparable] struct {
	r      R
	got    int64
	epoch  string
	behind bool
}

// Enqueue queues it and starts a drain goroutine writing to sink if none
// runs. A queue already holding limit frames closes the writer and
// reports QueueFull, unless the viewer can be caught up (see Writer).
func (w *Writer[R]) Enqueue(it Item[R], limit int, sink Sink[R]) Result {
	res, start := w.stage(it, limit)
	if start {
		w.start(sink)
	}
	return res
}

// stage queues it as Enqueue does but leaves the drain to the caller:
// start reports that none runs, and the caller owes the writer a start
// (until then frames queue up behind it, and no one else starts one).
func (w *Writer[R]) stage(it Item[R], limit int) (res Result, start bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ConnClosed, false
	}
	if len(w.queue) >= limit && !w.overflowLocked() {
		w.markClosedLocked()
		return QueueFull, false
	}
	if w.behind && it.Pos > 0 && w.behindIn(it.Room) {
		return Enqueued, false // the catch-up carries it
	}
	if len(w.queue) >= limit {
		w.markClosedLocked()
		return QueueFull, false
	}
	w.queue = append(w.queue, it)
	start = !w.draining
	w.draining = true
	return Enqueued, start
}

// start runs the drain a stage reported owed, on a worker of the drain
// pool.
func (w *Writer[R]) start(sink Sink[R]) {
	drains.run(func() { w.drain(sink) })
}

// WriteIdle lets the caller write a small frame itself, in place of a
// drain goroutine, when the writer is idle: open, nothing queued and no
// drain running. write runs under the writer's lock, so no drain starts
// and no close is marked while it runs; it must not block (one
// non-blocking send) and reports false when the frame was not written
// (the socket would block), in which case the caller queues it instead.
// WriteIdle reports false, without calling write, when the writer is not
// idle.
func (w *Writer[R]) WriteIdle(write func() bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.draining || len(w.queue) > 0 {
		return false
	}
	return write()
}

// overflowLocked drops the queued frames a catch-up replaces (msgs frames
// with positions) or that later ones supersede (lossy), and marks every
// room of the viewer behind. It reports false when the viewer is in no
// room and cannot be caught up.
func (w *Writer[R]) overflowLocked() bool {
	if len(w.rooms) == 0 {
		return false
	}
	kept := w.queue[:0]
	for _, q := range w.queue {
		if q.Pos == 0 && !q.Lossy {
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
func (w *Writer[R]) find(r R) int {
	for i := range w.rooms {
		if w.rooms[i].r == r {
			return i
		}
	}
	return -1
}

// behindIn reports whether frames of r are being dropped for a catch-up.
func (w *Writer[R]) behindIn(r R) bool {
	i := w.find(r)
	return i >= 0 && w.rooms[i].behind
}

// settleLocked sets behind from the rooms' flags.
func (w *Writer[R]) settleLocked() {
	w.behind = false
	for i := range w.rooms {
		w.behind = w.behind || w.rooms[i].behind
	}
}

// RunSink is a Sink that can write several frames in one call: a drain
// that finds prepared frames (Item.Prepared) queued one after another
// hands them over together, at most maxRun, so that a viewer behind by
// several frames can cost one write instead of one each. The last frame
// of a run may be of another kind (a prepared frame cut for the viewer,
// a frame right behind one the viewer already had).
type RunSink[R comparable] interface {
	Sink[R]
	// WriteFrames writes its, in order; it reports false as WriteFrame.
	WriteFrames(its []Item[R]) bool
}

// maxRun is the most frames a drain hands a RunSink at once.
const maxRun = 8

// drain writes queued frames to sink until the queue is empty, the writer
// closed, or sink reported the end; in the last case it closes the writer.
func (w *Writer[R]) drain(sink Sink[R]) {
	rs, _ := sink.(RunSink[R])
	var run []Item[R]
	for {
		var catchUp bool
		run, catchUp = w.next(run[:0], rs != nil)
		if catchUp {
			sink.CatchUp()
			continue
		}
		if len(run) == 0 {
			return
		}
		ok := false
		if len(run) == 1 {
			ok = sink.WriteFrame(run[0])
		} else {
			ok = rs.WriteFrames(run)
		}
		clear(run)
		if !ok {
			w.mu.Lock()
			w.markClosedLocked()
			w.draining = false
			w.mu.Unlock()
			return
		}
	}
}

// next appends the oldest queued frame to run, and, with runs, the
// prepared frames right behind it while the first is one too (at most
// maxRun). With none left it reports catchUp when the writer is behind
// (the drain goes on), else it ends the drain and returns run empty, as
// it does for a closed writer.
func (w *Writer[R]) next(run []Item[R], runs bool) ([]Item[R], bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(run) < maxRun && !w.closed {
		it, ok := w.takeLocked()
		if !ok {
			break
		}
		run = append(run, it)
		if !runs || !it.Prepared() {
			break
		}
		if len(w.queue) == 0 || !w.queue[0].Prepared() {
			break
		}
	}
	if len(run) > 0 {
		return run, false
	}
	if w.behind && !w.closed {
		return run, true
	}
	w.draining = false
	if cap(w.queue) > 4 {
		w.queue = nil // an idle viewer keeps no burst-sized queue
	}
	return run, false
}

// Prepared reports whether it is a prepared frame (PM) and no other kind:
// its bytes are shared and never change.
func (it Item[R]) Prepared() bool {
	return it.PM != nil && it.Batch == nil && !it.Ping && it.Pong == nil && it.Close == nil
}

// takeLocked takes the oldest queued frame the viewer is to be written;
// w.mu is held. It reports false when the queue is empty.
//
// A msgs frame never hands the viewer a position of its room it already
// has: a frame wholly at or below the room's got is skipped, and one that
// starts at or below it is cut to the positions after it (encoded for
// this viewer). Such frames are rare (a viewer that resumed ahead of this
// comet's view of the room, a catch-up racing a live frame), and without
// the check they would show messages twice.
func (w *Writer[R]) takeLocked() (it Item[R], ok bool) {
	for len(w.queue) > 0 {
		it = w.queue[0]
		n := copy(w.queue, w.queue[1:])
		w.queue[n] = Item[R]{}
		w.queue = w.queue[:n]
		if it.Pos == 0 {
			return it, true
		}
		i := w.find(it.Room)
		if i < 0 {
			return it, true
		}
		p := &w.rooms[i]
		switch {
		case it.EpochStart:
			p.got, p.epoch = it.Pos, it.Epoch
		case it.Epoch != p.epoch:
		case it.Pos <= p.got:
			continue // the viewer has every position of it
		default:
			it = it.After(p.got)
			p.got = it.Pos
		}
		return it, true
	}
	return Item[R]{}, false
}

// After returns it without the messages at or below position got: it
// itself when it has none, else a frame of the rest for one viewer.
func (it Item[R]) After(got int64) Item[R] {
	b := it.Src
	if b == nil {
		b = it.Batch
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
	return Item[R]{Batch: &rest, Pos: it.Pos, Epoch: it.Epoch, Room: it.Room, Live: it.Live, High: it.High}
}

// SetGot records, when the viewer joins room r, the position it has in r
// once the frames queued so far are written; r's lock is held, so no live
// frame of the room can come between.
func (w *Writer[R]) SetGot(r R, epoch string, pos int64) {
	w.mu.Lock()
	p := roomPos[R]{r: r, got: pos, epoch: epoch}
	if i := w.find(r); i >= 0 {
		w.rooms[i] = p
	} else {
		w.rooms = append(w.rooms, p)
	}
	w.settleLocked()
	w.mu.Unlock()
}

// Forget drops r from the viewer's rooms (it left r); r's lock is held.
func (w *Writer[R]) Forget(r R) {
	w.mu.Lock()
	if i := w.find(r); i >= 0 {
		last := len(w.rooms) - 1
		w.rooms[i] = w.rooms[last]
		w.rooms[last] = roomPos[R]{}
		w.rooms = w.rooms[:last]
		if last == 0 {
			w.rooms = nil
		}
		w.settleLocked()
	}
	w.mu.Unlock()
}

// BehindRooms returns the rooms waiting for a catch-up.
func (w *Writer[R]) BehindRooms() []R {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []R
	for _, p := range w.rooms {
		if p.behind {
			out = append(out, p.r)
		}
	}
	return out
}

// MarkClosed closes the writer: queued frames are dropped and new ones
// refused. A frame being written when it is called still completes.
func (w *Writer[R]) MarkClosed() {
	w.mu.Lock()
	w.markClosedLocked()
	w.mu.Unlock()
}

func (w *Writer[R]) markClosedLocked() {
	w.closed = true
	w.behind = false
	w.queue = nil
	w.rooms = nil
}

// IsClosed reports whether MarkClosed was called (or the drain ended the
// writer).
func (w *Writer[R]) IsClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// Settle recomputes whether some room is behind (a room left meanwhile is
// no longer waited for).
func (w *Writer[R]) Settle() {
	w.mu.Lock()
	w.settleLocked()
	w.mu.Unlock()
}

// CatchUpRoom replaces the frames of room r the viewer lost when its
// queue overflowed. When r is still behind, frames is called under the
// writer's lock with the epoch and last position the viewer has in r and
// returns the frames to queue after what is queued, or false when they
// cannot be had (r stays behind; the caller disconnects the viewer). It
// reports ok false in that case, and done when r was behind.
func (w *Writer[R]) CatchUpRoom(r R, frames func(epoch string, got int64) ([]Item[R], bool)) (ok, done bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := w.find(r)
	if i < 0 || !w.rooms[i].behind || w.closed {
		return true, false
	}
	p := &w.rooms[i]
	items, ok := frames(p.epoch, p.got)
	if !ok {
		return false, false
	}
	p.behind = false
	w.settleLocked()
	w.queue = append(w.queue, items...)
	return true, true
}
