package logic

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/route"
)

// Room settings (danmaku.RoomState) live in Redis (route.SetRoomState).
// POST /logic/admin/room changes them and writes a state event to the
// room's partition, which job delivers to the room's comets like a ban:
// they forward it to the viewers as the state frame. Every logic reads a
// room's settings at most once per stateFresh for its sends, so a change
// made through any logic holds on every logic within stateFresh plus one
// Redis read; the logic that made it applies it at once.

// stateFresh is how long a logic uses a room's settings before it reads
// them again.
const stateFresh = 500 * time.Millisecond

// maxStates bounds the rooms whose settings a logic keeps; beyond it, the
// ones older than stateFresh (which a send would read again anyway) go.
const maxStates = 10000

// roomStates is a logic's view of the settings of the rooms it serves.
type roomStates struct {
	mu sync.Mutex
	m  map[string]*stateEntry
}

type stateEntry struct {
	st         route.Room
	at         time.Time // when st was read; zero until the first read ends
	refreshing bool      // a caller is reading it again; others use st
	// first is closed when the room's first read ends: the callers that
	// came meanwhile wait for it rather than all read at once.
	first chan struct{}
}

func newRoomStates() *roomStates { return &roomStates{m: map[string]*stateEntry{}} }

// lookup returns room's settings when they are fresh, or when another
// caller is reading them again (the stale ones meanwhile: a hot room is
// read once per stateFresh, not by every send that finds it stale). While
// the room's first read is on its way it returns a channel to wait on
// and look up again. Else it reports false and marks the room as being
// read: the caller reads it and calls put or failed.
func (c *roomStates) lookup(room string, now time.Time) (st route.Room, ok bool, wait <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[room]
	switch {
	case e == nil:
		c.m[room] = &stateEntry{refreshing: true, first: make(chan struct{})}
		return st, false, nil
	case e.at.IsZero():
		return st, false, e.first
	case now.Sub(e.at) < stateFresh || e.refreshing:
		return e.st, true, nil
	}
	e.refreshing = true
	return e.st, false, nil
}

// put records room's settings as read at; a state of a lower version
// than the one kept (a read that raced with a change made here) leaves
// the kept one.
func (c *roomStates) put(room string, st route.Room, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxStates {
		for r, e := range c.m {
			if at.Sub(e.at) >= stateFresh && !e.refreshing {
				delete(c.m, r)
			}
		}
	}
	e := c.m[room]
	if e == nil {
		e = &stateEntry{}
		c.m[room] = e
	}
	if st.State.Ver >= e.st.State.Ver {
		e.st = st
	}
	e.at, e.refreshing = at, false
	if e.first != nil {
		close(e.first)
		e.first = nil
	}
}

// refresh reads room again after a change made here, so this logic
// applies it at once.
func (c *roomStates) refresh(ctx context.Context, store Store, room string, now time.Time) {
	if st, err := store.ReadRoom(ctx, room); err == nil {
		c.put(room, st, now)
	}
}

// failed ends a read of room that did not answer: the next caller tries
// again.
func (c *roomStates) failed(room string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[room]; e != nil {
		e.refreshing = false
		if e.at.IsZero() {
			close(e.first) // the waiters look up again; one of them reads
			delete(c.m, room)
		}
	}
}

// roomState returns room's settings and hidden users as this logic sees
// them: read from Redis when older than stateFresh. A read that fails is
// an EUNAVAILABLE error.
func (s *Server) roomState(ctx context.Context, room string) (route.Room, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	now := time.Now()
	for {
		st, ok, wait := s.states.lookup(room, now)
		if ok {
			return st, nil
		}
		if wait == nil {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return st, s.redisError("room state", ctx.Err())
		}
	}
	st, err := s.store.ReadRoom(ctx, room)
	if err != nil {
		s.states.failed(room)
		return st, s.redisError("room state", err)
	}
	s.states.put(room, st, now)
	return st, nil
}

// RoomResponse is the answer of GET /logic/room, declared in the root
// package.
type RoomResponse = danmaku.RoomResponse

// serveRoom is GET /logic/room?roomId=: the room's settings as this logic
// applies them to sends, guarded like a read of the room (authorizeRead).
// A page shows the modes before its viewer sends.
func (s *Server) serveRoom(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	room := r.URL.Query().Get("roomId")
	err := danmaku.CheckID("roomId", room)
	if err == nil {
		err = s.authorizeRead(r, room)
	}
	var st route.Room
	if err == nil {
		st, err = s.roomState(r.Context(), room)
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, RoomResponse{RoomID: room, State: st.State})
}

// adminRoom changes a room's settings: the modes the request names, the
// others stay. The new settings hold on this logic at once and on every
// logic within stateFresh; the state event carries them to the viewers. A
// request naming no mode changes nothing and answers the settings.
func (s *Server) adminRoom(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if req.RoomID == "" {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	p := route.StatePatch{SlowSeconds: req.SlowSeconds, MembersOnly: req.MembersOnly, UniqueSeconds: req.UniqueSeconds}
	check := danmaku.RoomState{}
	if p.SlowSeconds != nil {
		check.SlowSeconds = *p.SlowSeconds
	}
	if p.UniqueSeconds != nil {
		check.UniqueSeconds = *p.UniqueSeconds
	}
	if err := check.Check(""); err != nil {
		return AdminResponse{}, err
	}
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	if p == (route.StatePatch{}) {
		st, err := s.store.RoomState(ctx, req.RoomID)
		if err != nil {
			return AdminResponse{}, s.redisError("room state", err)
		}
		return AdminResponse{RoomID: req.RoomID, State: &st}, nil
	}
	now := time.Now()
	st, err := s.store.SetRoomState(ctx, req.RoomID, p)
	if err != nil {
		return AdminResponse{}, s.redisError("set room state", err)
	}
	s.states.refresh(ctx, s.store, req.RoomID, now)
	ev := danmaku.Event{Op: danmaku.OpState, Room: req.RoomID, ID: s.ids.next(), State: &st}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		s.log.Warn("room state saved, its event not written", zap.String("room", req.RoomID), zap.Error(err))
		return AdminResponse{}, danmaku.Unavailable("the settings hold for sends and new viewers, but the room's viewers were not told; set them again", err)
	}
	return AdminResponse{RoomID: req.RoomID, State: &st, EventID: ev.ID}, nil
}

// adminHide hides a user in a room for a duration (shadow hide): the
// user's sends are accepted as before, and reach only the user's own
// connections to the room. It holds on this logic at once and on every
// logic within stateFresh; messages accepted before it stay visible.
func (s *Server) adminHide(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := requireUserRoom(req); err != nil {
		return AdminResponse{}, err
	}
	d, err := parseSanction(req.Duration)
	if err != nil {
		return AdminResponse{}, err
	}
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	now := time.Now()
	until := now.Add(d)
	if err := s.store.Hide(ctx, strconv.FormatInt(req.UserID, 10), req.RoomID, until); err != nil {
		return AdminResponse{}, s.redisError("hide", err)
	}
	s.states.refresh(ctx, s.store, req.RoomID, now)
	return AdminResponse{UserID: req.UserID, RoomID: req.RoomID, Until: until.UnixMilli()}, nil
}

// adminUnhide lifts a user's hide in a room: the user's next sends reach
// everybody again (the hidden ones stay hidden).
func (s *Server) adminUnhide(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := requireUserRoom(req); err != nil {
		return AdminResponse{}, err
	}
	resp, err := s.lift(r, req, "unhide", s.store.Unhide)
	if err == nil {
		ctx, cancel := s.redisCtx(r)
		defer cancel()
		s.states.refresh(ctx, s.store, req.RoomID, time.Now())
	}
	return resp, err
}
