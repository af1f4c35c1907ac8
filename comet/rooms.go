package comet

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/route"
)

// Rooms of a connection. A connection holds up to Config.MaxRoomsPerConn
// rooms; each is a member: the connection's entry in the room's viewer list,
// its registration in Redis, and its position in the room's timeline,
// which the writer keeps (roomPos). The connection's queue and writer are
// one for all its rooms.
//
// sub adds a room, unsub leaves one, join leaves every other room and adds
// its room (a switch); the reader goroutine does all three, one frame at a
// time. A ban event may take a room away from another goroutine (banUser),
// and release takes them all; conn.mu makes each removal happen once.

// member is one room of a connection. c, room and reg are set before the
// member is shared and never change; r is an atomic pointer the joiner
// sets and leave clears; idx and online are the room's, guarded by its
// lock.
type member struct {
	c    *conn
	room string
	// reg is the id the room's registration has in Redis (route.Conn.ID):
	// the connection id for the connection's first room, the connection id
	// with a sequence number ("c-3f9a1b2c4d5e-1a.2") for every later one. The
	// registrations of one connection's rooms are separate entries, and a
	// room left and a room joined after it never share one, so an
	// unregistration still under way cannot undo a later registration.
	reg string
	// r is the room once entered (nil before and after); idx is m's place
	// in r.members and online the room's viewer count the viewer was last
	// told (welcome or online frame), both guarded by r.mu.
	r      atomic.Pointer[room]
	idx    int
	online int64
	// req is the density the viewer asks for in the room (normal messages
	// a second, 0 every message, noCap none); the reader sets it, the
	// room reads it under its lock (density.go). uid is the viewer's
	// numeric user id (hasUID), for its own messages. slot and ownSeq are
	// the room's, guarded by its lock: the tier the viewer is served, and
	// the last live frame it was given a frame of its own of.
	req    atomic.Int32
	uid    int64
	hasUID bool
	slot   int
	ownSeq uint64
	mark   mark // what its tier had left out when it was last brought up to date alone (densityflush.go)
}

// member returns the connection's member of room, or nil.
func (c *conn) member(room string) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.room == room {
			return m
		}
	}
	return nil
}

// addMember makes room one of the connection's rooms, or returns nil when
// the connection holds MaxRoomsPerConn rooms already.
func (c *conn) addMember(room string) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.members) >= c.s.cfg.MaxRoomsPerConn {
		return nil
	}
	reg := c.id
	if c.nextReg > 0 {
		reg += "." + strconv.FormatUint(c.nextReg, 36)
	}
	c.nextReg++
	m := &member{c: c, room: room, reg: reg}
	m.uid, m.hasUID = parseUID(c.user)
	m.req.Store(int32(c.density))
	c.members = append(c.members, m)
	return m
}

// dropMember removes m from the connection's rooms. It reports false when
// m was not among them any more (left already, or the connection is
// released), and how many rooms the connection holds afterwards.
func (c *conn) dropMember(m *member) (ok bool, left int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.members {
		if x == m {
			c.members = append(c.members[:i], c.members[i+1:]...)
			return true, len(c.members)
		}
	}
	return false, len(c.members)
}

// takeMembers removes every room of the connection but keep and returns
// them.
func (c *conn) takeMembers(keep string) []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out, kept []*member
	for _, m := range c.members {
		if m.room == keep {
			kept = append(kept, m)
		} else {
			out = append(out, m)
		}
	}
	c.members = kept
	return out
}

// memberList returns the connection's members, in the order it joined
// their rooms.
func (c *conn) memberList() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*member(nil), c.members...)
}

// rooms returns the connection's rooms, in the order it joined them.
func (c *conn) rooms() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.room
	}
	return out
}

// leave takes m out of its room and out of Redis; m is no longer among the
// connection's rooms.
func (c *conn) leave(m *member) {
	c.s.hub.leave(m)
	c.s.reg.unregisterAsync(m)
}

// subscribe adds req.room to the connection's rooms: it registers the
// viewer there, sends the welcome frame and the replay (history on join,
// or what a resume missed), and only then starts delivering the room's
// batches, so the welcome is always the first frame of a room. A room the
// connection holds already is answered with a welcome only. A room the
// token does not allow gets the error frame forbidden (token_expired once
// the token expired), a room beyond
// MaxRoomsPerConn the error frame too_many_rooms; the connection keeps its
// rooms. A room the user is banned from, or a registry that does not
// answer, is handled by refused.
func (c *conn) subscribe(req joinReq) {
	s := c.s
	if !c.mayJoin(req.room) {
		return
	}
	w := welcomeFrame{Op: opWelcome, ConnID: c.id, Room: req.room, HeartbeatMs: s.cfg.PingPeriod.Milliseconds(), Send: c.takesSends()}
	if m := c.member(req.room); m != nil {
		w.Online = s.reg.online(req.room)
		if r := m.r.Load(); r != nil {
			r.mu.Lock()
			w.Epoch, w.Pos, w.State, w.Pin = r.tl.Epoch, r.tl.Last, r.stateLocked(), r.pinLocked(time.Now())
			m.online = w.Online
			r.mu.Unlock()
		}
		c.sendItem(item{PM: prepare(w), Size: len(c.id) + len(req.room) + 96})
		return
	}
	m := c.addMember(req.room)
	if m == nil {
		s.metrics.rejected("too_many_rooms")
		c.sendRoomError(req.room, codeTooMany,
			"room "+req.room+": a connection holds at most "+strconv.Itoa(s.cfg.MaxRoomsPerConn)+" rooms")
		return
	}
	online, err := s.reg.register(m)
	if err != nil {
		c.refused(m, err)
		return
	}
	w.Online = online
	s.enter(m, req, w)
}

// refused handles a registration of m that failed. The registry may have
// written m's records before it refused (a ban), so they are removed. A
// user banned from the room gets the error frame banned (see
// refuseBanned); a registry that did not answer gets the error frame
// unavailable and the connection is closed with 1013 (try again later).
func (c *conn) refused(m *member, err error) {
	s := c.s
	c.dropMember(m)
	s.reg.unregisterAsync(m)
	var banned *route.BanError
	if errors.As(err, &banned) {
		c.refuseBanned(m.room, banned.Left)
		return
	}
	s.log.Warn("register viewer", zap.String("conn", c.id), zap.String("room", m.room), zap.Error(err))
	c.sendRoomError(m.room, codeUnavailable, "cannot join now, try again later")
	c.closeAfterQueued(CloseUnavailable, "registry unavailable")
}

// join switches the connection to req.room: it leaves every other room and
// subscribes to req.room (a welcome only when it was there already). A
// room the token does not allow is refused before anything is left.
func (c *conn) join(req joinReq) {
	if !c.mayJoin(req.room) {
		return
	}
	for _, m := range c.takeMembers(req.room) {
		c.leave(m)
	}
	c.subscribe(req)
}

// unsubscribe leaves room and confirms it with the unsubscribed frame,
// after which no frame of the room comes. A room the connection does not
// hold is confirmed the same way.
func (c *conn) unsubscribe(room string) {
	if m := c.member(room); m != nil {
		if ok, _ := c.dropMember(m); ok {
			c.leave(m)
		}
	}
	c.send(prepare(unsubscribedFrame{Op: opUnsubscribed, Room: room}), len(room)+32)
}

// leaveAll takes the connection out of every room (it is going away).
func (c *conn) leaveAll() {
	for _, m := range c.takeMembers("") {
		c.leave(m)
	}
}

// CatchUp sends a viewer whose queue overflowed what it missed in each of
// its rooms since the last position it got there, from the room's ring,
// once its writer is free again. A gap a ring no longer covers, or wider
// than maxCatchUp, disconnects the viewer with 4008.
func (c *conn) CatchUp() {
	caught := false
	for _, r := range c.w.BehindRooms() {
		ok, done := c.catchUpRoom(r)
		if !ok {
			c.slowConsumer()
			return
		}
		caught = caught || done
	}
	c.w.Settle() // a room left meanwhile is no longer waited for
	if caught {
		c.s.metrics.caughtUp()
	}
}

// catchUpRoom queues the catch-up frames of room r behind the frames queued
// so far; r's lock is held meanwhile, so live frames of r queue after it.
// It reports false when the ring does not cover the gap, and done when r
// was still behind (not left meanwhile).
func (c *conn) catchUpRoom(r *room) (ok, done bool) {
	m := c.member(r.id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if m != nil && m.r.Load() != r {
		m = nil
	}
	slot := r.dc.tiers.All()
	if m != nil {
		slot = r.slotLocked(m)
	}
	return c.w.CatchUpRoom(r, func(epoch string, got int64) ([]item, bool) {
		t := &r.tl
		from := epoch
		if from == "" && got == 0 {
			from = t.Epoch // joined before the room had a timeline: all of it is new
		}
		if !t.Covers(from, got) || t.Last-got > maxCatchUp {
			return nil, false
		}
		items := r.replayLocked(got, slot, nil)
		if len(items) > 0 && epoch != t.Epoch {
			items[0].EpochStart = true
		}
		if m != nil {
			// The replay's skipped counts took in what the viewer's tier
			// left out and holds so far: its next frame counts the rest.
			r.markLocked(m, slot)
		}
		return items, true
	})
}

// maxCatchUp is the largest gap, in positions, a slow viewer is caught up
// over; a viewer further behind is disconnected (4008) and resumes when it
// reconnects. A catch-up is the ring's shared replay frames (see
// replayLocked), so it costs the viewer's queue a frame per timeline.ReplayBlock.
const maxCatchUp = 4096
