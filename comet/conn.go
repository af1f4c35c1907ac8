package comet

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/sendq"
	"github.com/danmaku/danmaku/comet/internal/wsframe"
	"github.com/danmaku/danmaku/internal/auth"
)

// closeGrace is how long a closing connection waits for the peer's close
// reply, and how long a close frame may wait behind a stuck write.
const closeGrace = time.Second

// conn is one viewer. Its reader goroutine lives as long as the socket;
// its writer drains the send queue on a goroutine that exists only while
// the queue holds frames, so an idle viewer costs one parked goroutine and
// no write buffer.
//
// Ownership: s, ws, fc, id, user, ip, ipKey, seq and claims are set before
// the reader starts and never change. ops belongs to the reader. mu guards
// members and nextReg, which the reader changes and a ban or the release
// may too. w locks for itself: any goroutine enqueues, its drain writes.
type conn struct {
	s    *Server
	ws   *websocket.Conn
	fc   *wsframe.Conn // nil when the connection is not a socket
	id   string
	user string
	// ip is the viewer's address, which the send path's per-address
	// bucket counts (send.go); ipKey is what the connection counts
	// against in the per-address limit of connections (its address, or
	// its IPv6 network; "" with no limit).
	ip    string
	ipKey string
	seq   uint64
	// claims are the viewer's token (nil: it showed none); set before the
	// reader starts, read only by it and by the notice index.
	claims *auth.Claims
	// deflate is set when the viewer negotiated permessage-deflate
	// (before the reader starts).
	deflate bool
	// ops is the connection's budget of room ops; only the reader uses it.
	ops opBucket
	// density is what the viewer asks for in rooms it joins (density.go:
	// normal messages a second, 0 every message, noCap none): set from
	// the URL or the token before the reader starts, changed by a density
	// op without a room; only the reader uses it.
	density int
	// sends is set once the viewer sent a comment over the socket: the
	// reader then reads its frames on its own stack (readLoop); only the
	// reader uses it.
	sends bool

	// mu guards members and nextReg (see rooms.go).
	mu sync.Mutex
	// members are the connection's rooms in the order it joined them,
	// including one whose registration is under way.
	members []*member
	// nextReg numbers the connection's registrations in Redis.
	nextReg uint64

	// seen is when something last arrived from the viewer (UnixNano):
	// the ping sweep closes a viewer silent for PongWait.
	seen atomic.Int64
	// heartbeat is when the viewer's last {"op":"ping"} came (UnixNano);
	// it was answered with a pong frame, so within a ping period of it
	// the viewer needs no ping of the comet.
	heartbeat atomic.Int64
	// pongsOwed counts the heartbeats not yet answered (heartbeat.go).
	pongsOwed atomic.Int32

	w writer
}

// enqueue hands it to the viewer's writer without blocking. A full queue
// closes the writer; the caller disconnects the viewer (slowConsumer).
func (c *conn) enqueue(it item) sendq.Result {
	return c.w.Enqueue(it, c.s.cfg.QueueSize, c)
}

// WriteFrame writes one queued frame to the socket; the writer calls it
// from its drain goroutine. It reports false once nothing more is to be
// written: after a close frame, or when the write failed.
func (c *conn) WriteFrame(it item) bool {
	deadline := time.Now().Add(c.s.cfg.WriteWait)
	var err error
	switch {
	case it.Ping:
		err = c.ws.WriteControl(websocket.PingMessage, nil, deadline)
	case it.Pong != nil:
		err = c.ws.WriteControl(websocket.PongMessage, it.Pong, deadline)
	case it.Close != nil:
		c.ws.WriteControl(websocket.CloseMessage, it.Close, deadline)
		// The reader gets the peer's close reply, or gives up soon.
		c.ws.NetConn().SetReadDeadline(time.Now().Add(closeGrace))
		return false
	case it.Batch != nil:
		data, merr := json.Marshal(it.Batch)
		if merr != nil {
			return true
		}
		it.Size = len(data)
		c.ws.SetWriteDeadline(deadline)
		err = c.ws.WriteMessage(websocket.TextMessage, data)
	default:
		c.ws.SetWriteDeadline(deadline)
		err = c.ws.WritePreparedMessage(it.PM)
	}
	if err != nil {
		c.s.metrics.writeError()
		// The reader notices the closed socket and cleans up.
		c.ws.Close()
		return false
	}
	c.s.metrics.wrote(it.Size)
	if it.Live != 0 && c.seq%fanoutSample == 0 {
		c.s.metrics.wroteLive(it.Live, it.High, time.Now())
	}
	return true
}

// WriteFrames writes frames the writer found queued one after another:
// the prepared ones among them go out in one write (wsframe.Conn.Cork),
// so a viewer behind by several frames costs one system call, not one
// each. It reports false as WriteFrame.
func (c *conn) WriteFrames(its []item) bool {
	for _, it := range its {
		if c.fc != nil && it.Prepared() {
			c.fc.Cork()
		} else if !c.uncork() {
			return false
		}
		if !c.WriteFrame(it) {
			if c.fc != nil {
				c.fc.Uncork() // the socket is closed: drops what was held
			}
			return false
		}
	}
	return c.uncork()
}

// uncork writes what a cork held; it reports false when the write failed.
func (c *conn) uncork() bool {
	if c.fc == nil {
		return true
	}
	if err := c.fc.Uncork(); err != nil {
		c.s.metrics.writeError()
		c.ws.Close()
		return false
	}
	return true
}

// isClosed reports whether the viewer is being disconnected.
func (c *conn) isClosed() bool { return c.w.IsClosed() }

// kill disconnects the viewer with a close code without blocking the
// caller: queued frames are dropped, the close frame is written by a
// goroutine of its own (it may wait behind a write in progress), and the
// reader then sees the peer's reply or the closed socket and cleans up.
func (c *conn) kill(code int, text string) {
	c.w.MarkClosed()
	go func() {
		msg := websocket.FormatCloseMessage(code, text)
		if err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeGrace)); err != nil {
			c.ws.Close()
			return
		}
		// Let the reader receive the peer's close reply, but not forever.
		c.ws.NetConn().SetReadDeadline(time.Now().Add(closeGrace))
	}()
}

// slowConsumer disconnects a viewer whose queue overflowed with 4008 and
// counts it.
func (c *conn) slowConsumer() {
	c.s.metrics.slowConsumer()
	c.kill(CloseSlowConsumer, "slow consumer")
}

// closeAfterQueued disconnects the viewer with a close code once the
// frames already queued (an error frame explaining why) are written.
func (c *conn) closeAfterQueued(code int, text string) {
	if c.enqueue(item{Close: websocket.FormatCloseMessage(code, text)}) != enqueued {
		c.kill(code, text)
	}
}

// send queues a frame meant for this viewer only (welcome, error, pong).
func (c *conn) send(pm *websocket.PreparedMessage, size int) {
	c.sendItem(item{PM: pm, Size: size})
}

func (c *conn) sendItem(it item) {
	if c.enqueue(it) == queueFull {
		c.slowConsumer()
	}
}

func (c *conn) sendError(code, message string) {
	c.sendRoomError("", code, message)
}

// sendRoomError queues an error frame about room ("" for none).
func (c *conn) sendRoomError(room, code, message string) {
	f := errorFrame{Op: opError, Room: room, Code: code, Message: message}
	pm := prepare(f)
	c.send(pm, len(f.Room)+len(f.Code)+len(f.Message)+40)
}

// readLoop serves the viewer until the connection ends, then removes every
// trace of it. It runs in a goroutine of its own, started after the HTTP
// handler returned, so the handler's stack and request state are not kept
// for the life of the connection.
//
// An idle viewer is the common case, so this goroutine is kept to the
// smallest stack the runtime has (2 KiB): it only waits for the socket
// (wsframe.Conn.WaitReadable, a shallow call chain), and everything that needs
// a deeper stack — gorilla's frame reading, JSON, joining — runs on a
// short-lived goroutine (deep) whose stack is gone when it is done. A
// stack that grew once is never shrunk below 4 KiB by the runtime. A
// viewer that sent a comment over the socket (send.go) is the exception:
// from then on its frames are read on the reader itself, which keeps the
// grown stack, since a sender's frames come often and each would
// otherwise start a goroutine and grow its stack again.
func (c *conn) readLoop(u urlRooms) {
	defer c.s.release(c)
	if c.fc == nil {
		c.serveFrames(u)
		return
	}
	if !c.deep(func() bool { c.start(u); return true }) {
		return
	}
	for {
		// An error here is the socket closed: by the peer, or by the ping
		// sweep for a viewer that stopped answering pings.
		if c.fc.WaitReadable() != nil {
			return
		}
		if c.fc.Text(c.heartbeatMatch()) {
			c.answerHeartbeat()
			continue
		}
		if c.sends {
			if !c.readReady() {
				return
			}
			continue
		}
		if !c.deep(c.readReady) {
			return
		}
	}
}

// handoffs holds the channels deep waits on, so a frame read does not
// make a new one; an idle viewer holds none.
var handoffs = sync.Pool{New: func() any { return make(chan bool, 1) }}

// deep runs fn on a goroutine of its own and returns its result.
func (c *conn) deep(fn func() bool) bool {
	done := handoffs.Get().(chan bool)
	go func() { done <- fn() }()
	ok := <-done
	handoffs.Put(done)
	return ok
}

// start prepares the connection and handles the rooms of the URL: an
// error frame for each invalid one, then a subscription to each valid one,
// in the URL's order.
func (c *conn) start(u urlRooms) {
	ws := c.ws
	ws.SetReadLimit(c.s.cfg.MaxFrameBytes)
	ws.SetPongHandler(func(string) error { c.alive(); return nil })
	for _, err := range u.bad {
		c.sendError(codeBadRoom, badRoomText(err))
	}
	for _, req := range u.reqs {
		if c.isClosed() {
			return
		}
		c.subscribe(req)
	}
	if u.nOver > 0 {
		c.s.metrics.rejected("too_many_rooms")
		c.sendRoomError(u.over, codeTooMany, fmt.Sprintf("room %s and %d more of the URL: a connection holds at most %d rooms",
			u.over, u.nOver-1, c.s.cfg.MaxRoomsPerConn))
	}
}

// alive notes that the viewer showed it is there. It is a store, not a
// read deadline: an idle viewer answering pings sets no timer.
func (c *conn) alive() { c.seen.Store(time.Now().UnixNano()) }

// silent reports whether nothing arrived from the viewer for PongWait.
func (c *conn) silent(now time.Time) bool {
	return now.UnixNano()-c.seen.Load() > int64(c.s.cfg.PongWait)
}

// pingDue reports whether the viewer is to be pinged: it did not send a
// heartbeat of its own within the last PingPeriod. A viewer whose client
// sends one every heartbeatMs (danmaku.js does) has traffic both ways and
// shows it is there without the comet's pings.
func (c *conn) pingDue(now time.Time) bool {
	return now.UnixNano()-c.heartbeat.Load() >= int64(c.s.cfg.PingPeriod)
}

// pingFrame is a WebSocket ping with no payload, as a server sends it.
var pingFrame = []byte{0x89, 0x00}

// ping sends the viewer its periodic ping. A viewer with nothing queued
// or being written gets it at once from the caller's goroutine with one
// non-blocking send (no drain goroutine, no write deadline); otherwise,
// or when its socket is full, the ping is queued like any frame.
func (c *conn) ping() {
	if c.fc != nil && c.w.WriteIdle(c.pingNow) {
		return
	}
	if c.enqueue(pingItem) == queueFull {
		c.slowConsumer()
	}
}

// pingNow writes pingFrame without waiting; the writer's lock is held, so
// no other frame is being written. It reports false when the socket has
// no room (the ping is queued instead).
func (c *conn) pingNow() bool { return c.writeNow(pingFrame, 0) }

// writeNow writes frame (a ping or a pong, size bytes of payload counted)
// with one non-blocking send while the writer's lock is held. It reports
// false when the socket has no room.
func (c *conn) writeNow(frame []byte, size int) bool {
	n, err := c.fc.TryWrite(frame)
	switch {
	case err != nil || n > 0 && n < len(frame):
		// A failed send, or part of a frame (a socket with room for a few
		// bytes): the connection cannot go on; the reader cleans up.
		c.s.metrics.writeError()
		c.ws.Close()
	case n == 0:
		return false
	default:
		c.s.metrics.wrote(size)
	}
	return true
}

// readReady takes in what the socket has and serves every complete frame.
// It reports false when the connection is over.
func (c *conn) readReady() bool {
	ready, err := c.fc.Pump()
	if err != nil || c.isClosed() {
		return false
	}
	c.alive()
	if ready && c.deflate {
		c.fc.Text(learnHeartbeat)
	}
	for ready {
		if !c.readMessage() {
			return false
		}
		ready = c.fc.Pending()
	}
	return true
}

// serveFrames is the plain loop for a connection that is not a socket:
// the reader waits inside gorilla.
func (c *conn) serveFrames(u urlRooms) {
	c.start(u)
	for c.readMessage() {
	}
}

// readMessage reads and answers one client message. It reports false when
// the connection is over.
func (c *conn) readMessage() bool {
	s := c.s
	mt, data, err := c.ws.ReadMessage()
	if err != nil {
		if errors.Is(err, websocket.ErrReadLimit) {
			s.metrics.rejected("frame_too_big")
		}
		return false
	}
	if c.isClosed() {
		return false
	}
	c.alive()
	if c.invalidText(mt, data) {
		return true // the reader ends when the close completes
	}
	if mt != websocket.TextMessage {
		c.sendError(codeBadFrame, "frames must be JSON text frames")
		return true
	}
	f, err := parseFrame(data)
	if err != nil {
		fe := err.(*frameError)
		s.metrics.badFrame(fe.Code)
		c.sendError(fe.Code, fe.Message)
		return true
	}
	// Sends have their own limits (the send path's buckets per user and
	// address).
	if f.Op != opPing && f.Op != danmaku.OpSend && !c.mayOp(f.Room) {
		return true
	}
	switch f.Op {
	case opPing:
		c.heartbeat.Store(time.Now().UnixNano())
		c.send(pongFrame, pongFrameLen)
	case opJoin:
		c.join(joinReqOf(f))
	case opSub:
		c.subscribe(joinReqOf(f))
	case opUnsub:
		c.unsubscribe(f.Room)
	case opDensity:
		c.setDensity(f.Room, *f.Max)
	case danmaku.OpSend:
		c.sendMessages(f)
	}
	return true
}
