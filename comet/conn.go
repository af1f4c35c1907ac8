package comet

import (
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/route"
)

// closeGrace is how long a closing connection waits for the peer's close
// reply, and how long a close frame may wait behind a stuck write.
const closeGrace = time.Second

// conn is one viewer. Its reader goroutine lives as long as the socket;
// its writer drains the send queue on a goroutine that exists only while
// the queue holds frames, so an idle viewer costs one parked goroutine and
// no write buffer.
type conn struct {
	s    *Server
	ws   *websocket.Conn
	fc   *frameConn // nil when the connection is not a socket
	id   string
	user string
	ip   string
	seq  uint64
	// claims are the viewer's token (nil: auth off); set before the reader
	// starts, read only by it.
	claims *auth.Claims

	// roomID is the room the registry knows this viewer in; only the reader
	// goroutine touches it.
	roomID string

	// room is the room the viewer is in (nil: none); idx its place in
	// room.conns, guarded by the room's lock.
	room roomPtr
	idx  int

	w writer
}

// enqueue hands it to the viewer's writer without blocking. A full queue
// closes the writer; the caller disconnects the viewer (slowConsumer).
func (c *conn) enqueue(it item) enqueueResult {
	return c.w.enqueue(it, c.s.cfg.QueueSize, c)
}

// writeFrame writes one queued frame to the socket; the writer calls it
// from its drain goroutine. It reports false once nothing more is to be
// written: after a close frame, or when the write failed.
func (c *conn) writeFrame(it item) bool {
	deadline := time.Now().Add(c.s.cfg.WriteWait)
	var err error
	switch {
	case it.ping:
		err = c.ws.WriteControl(websocket.PingMessage, nil, deadline)
	case it.pong != nil:
		err = c.ws.WriteControl(websocket.PongMessage, it.pong, deadline)
	case it.close != nil:
		c.ws.WriteControl(websocket.CloseMessage, it.close, deadline)
		// The reader gets the peer's close reply, or gives up soon.
		c.ws.NetConn().SetReadDeadline(time.Now().Add(closeGrace))
		return false
	case it.batch != nil:
		data, merr := json.Marshal(it.batch)
		if merr != nil {
			return true
		}
		it.size = len(data)
		c.ws.SetWriteDeadline(deadline)
		err = c.ws.WriteMessage(websocket.TextMessage, data)
	default:
		c.ws.SetWriteDeadline(deadline)
		err = c.ws.WritePreparedMessage(it.pm)
	}
	if err != nil {
		c.s.metrics.writeError()
		// The reader notices the closed socket and cleans up.
		c.ws.Close()
		return false
	}
	c.s.metrics.wrote(it.size)
	return true
}

// isClosed reports whether the viewer is being disconnected.
func (c *conn) isClosed() bool { return c.w.isClosed() }

// kill disconnects the viewer with a close code without blocking the
// caller: queued frames are dropped, the close frame is written by a
// goroutine of its own (it may wait behind a write in progress), and the
// reader then sees the peer's reply or the closed socket and cleans up.
func (c *conn) kill(code int, text string) {
	c.w.markClosed()
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

// catchUp sends a viewer whose queue overflowed what it missed since the
// last position it got, as one frame from the room's ring, when its writer
// is free again; live frames after it queue behind it (the room's lock is
// held). A gap the ring no longer covers disconnects it with 4008.
func (c *conn) catchUp() {
	r := c.room.Load()
	if r == nil {
		c.w.mu.Lock()
		c.w.behind = false
		c.w.mu.Unlock()
		return
	}
	r.mu.Lock()
	w := &c.w
	w.mu.Lock()
	if !w.behind || w.closed {
		w.mu.Unlock()
		r.mu.Unlock()
		return
	}
	if c.room.Load() != r || !r.tl.covers(w.gotEpoch, w.got) {
		w.mu.Unlock()
		r.mu.Unlock()
		c.slowConsumer()
		return
	}
	w.behind = false
	msgs := r.tl.after(w.got, r.tl.ring.n)
	if len(msgs) > 0 {
		b := danmaku.NewBatch(r.id, msgs)
		b.Epoch, b.Replay = r.tl.epoch, true
		w.queue = append(w.queue, item{batch: &b, pos: msgs[len(msgs)-1].Pos, epoch: b.Epoch})
	}
	w.mu.Unlock()
	r.mu.Unlock()
	c.s.metrics.caughtUp()
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
	if c.enqueue(item{close: websocket.FormatCloseMessage(code, text)}) != enqueued {
		c.kill(code, text)
	}
}

// send queues a frame meant for this viewer only (welcome, error, pong).
func (c *conn) send(pm *websocket.PreparedMessage, size int) {
	c.sendItem(item{pm: pm, size: size})
}

func (c *conn) sendItem(it item) {
	if c.enqueue(it) == queueFull {
		c.slowConsumer()
	}
}

func (c *conn) sendError(code, message string) {
	f := errorFrame{Op: opError, Code: code, Message: message}
	pm := prepare(f)
	c.send(pm, len(f.Code)+len(f.Message)+32)
}

// readLoop serves the viewer until the connection ends, then removes every
// trace of it. It runs in a goroutine of its own, started after the HTTP
// handler returned, so the handler's stack and request state are not kept
// for the life of the connection.
//
// An idle viewer is the common case, so this goroutine is kept to the
// smallest stack the runtime has (2 KiB): it only waits for the socket
// (frameConn.waitReadable, a shallow call chain), and everything that needs
// a deeper stack — gorilla's frame reading, JSON, joining — runs on a
// short-lived goroutine (deep) whose stack is gone when it is done. A
// stack that grew once is never shrunk below 4 KiB by the runtime.
func (c *conn) readLoop(req joinReq, badRoom error) {
	defer c.s.release(c)
	if c.fc == nil {
		c.serveFrames(req, badRoom)
		return
	}
	if !c.deep(func() bool { c.start(req, badRoom); return true }) {
		return
	}
	for {
		// A read deadline passing here means the viewer stopped answering
		// pings.
		if c.fc.waitReadable() != nil {
			return
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

// start prepares the connection and handles the room of the URL.
func (c *conn) start(req joinReq, badRoom error) {
	ws := c.ws
	ws.SetReadLimit(c.s.cfg.MaxFrameBytes)
	c.alive()
	ws.SetPongHandler(func(string) error { c.alive(); return nil })
	switch {
	case badRoom != nil:
		c.sendError(codeBadRoom, badRoomText(badRoom))
	case req.room != "":
		c.join(req)
	}
}

// alive extends the read deadline: the viewer showed it is there.
func (c *conn) alive() { c.ws.SetReadDeadline(time.Now().Add(c.s.cfg.PongWait)) }

// readReady takes in what the socket has and serves every complete frame.
// It reports false when the connection is over.
func (c *conn) readReady() bool {
	ready, err := c.fc.pump()
	if err != nil || c.isClosed() {
		return false
	}
	c.alive()
	for ready {
		if !c.readMessage() {
			return false
		}
		ready = c.fc.pending()
	}
	return true
}

// serveFrames is the plain loop for a connection that is not a socket:
// the reader waits inside gorilla.
func (c *conn) serveFrames(req joinReq, badRoom error) {
	c.start(req, badRoom)
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
	switch f.Op {
	case opPing:
		c.send(pongFrame, pongFrameLen)
	case opJoin:
		req := joinReq{room: f.Room, epoch: f.Epoch}
		if f.Since != nil {
			req.resume, req.since = true, *f.Since
		}
		c.join(req)
	}
	return true
}

// join registers the viewer in req.room (leaving its current room), sends
// the welcome frame and the replay (history on join, or what a resume
// missed), and only then starts delivering the room's batches, so the
// welcome is always the first frame of a room. A viewer that cannot be
// registered gets an error frame and is closed with 1013 (try again
// later); a user banned from the room gets the error frame "banned" and is
// closed with CloseBanned. A join of the room the viewer is in is answered
// with a welcome only.
func (c *conn) join(req joinReq) {
	s := c.s
	room := req.room
	if !c.mayJoin(room) {
		s.metrics.rejected("forbidden_room")
		c.sendError(codeForbidden, "room "+room+": not allowed by the token")
		return
	}
	old := c.roomID
	if old != "" && old != room {
		s.hub.leave(c, old)
	}
	online, err := s.reg.move(c, old, room)
	var banned *route.BanError
	if errors.As(err, &banned) {
		// The registry wrote the connection's own records before it
		// refused the room: release unregisters roomID.
		c.roomID = room
		c.refuseBanned(room, banned.Left)
		return
	}
	if err != nil {
		s.log.Warn("register viewer", zap.String("conn", c.id), zap.String("room", room), zap.Error(err))
		// The registry may hold either room; release unregisters roomID,
		// the old one is retried here (both calls are idempotent).
		if old != "" && old != room {
			s.reg.unregisterAsync(c, old)
		}
		c.roomID = room
		c.sendError(codeUnavailable, "cannot join now, try again later")
		c.closeAfterQueued(CloseUnavailable, "registry unavailable")
		return // the reader ends when the close completes
	}
	c.roomID = room
	w := welcomeFrame{
		Op: opWelcome, ConnID: c.id, Room: room, Online: online,
		HeartbeatMs: s.cfg.PingPeriod.Milliseconds(),
	}
	if old != room {
		s.enter(c, req, w)
		return
	}
	if r := c.room.Load(); r != nil {
		r.mu.Lock()
		w.Epoch, w.Pos = r.tl.epoch, r.tl.last
		r.mu.Unlock()
	}
	c.sendItem(item{pm: prepare(w), size: len(c.id) + len(room) + 96})
}
