package logic

import (
	"net/http"
	"strconv"
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
// room's settings at most once per half second for its sends
// (sendpath.Path.RoomState), so a change made through any logic holds on
// every logic within that plus one Redis read; the logic that made it
// applies it at once.

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
		st, err = s.send.RoomState(r.Context(), room)
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, RoomResponse{RoomID: room, State: st.State})
}

// adminRoom changes a room's settings: the modes the request names, the
// others stay. The new settings hold on this logic at once and on every
// logic within half a second; the state event carries them to the viewers. A
// request naming no mode changes nothing and answers the settings.
func (s *Server) adminRoom(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if req.RoomID == "" {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "roomId", "must not be empty")
	}
	p := route.StatePatch{SlowSeconds: req.SlowSeconds, MembersOnly: req.MembersOnly, UniqueSeconds: req.UniqueSeconds,
		DelaySeconds: req.DelaySeconds, Review: req.Review}
	check := danmaku.RoomState{}
	for _, f := range []struct{ dst, src *int }{{&check.SlowSeconds, p.SlowSeconds}, {&check.UniqueSeconds, p.UniqueSeconds},
		{&check.DelaySeconds, p.DelaySeconds}} {
		if f.src != nil {
			*f.dst = *f.src
		}
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
	s.send.RefreshRoom(ctx, req.RoomID, now)
	ev := danmaku.Event{Op: danmaku.OpState, Room: req.RoomID, ID: s.ids.Next(), State: &st}
	if err := s.produceEvent(r.Context(), ev); err != nil {
		s.log.Warn("room state saved, its event not written", zap.String("room", req.RoomID), zap.Error(err))
		return AdminResponse{}, danmaku.Unavailable("the settings hold for sends and new viewers, but the room's viewers were not told; set them again", err)
	}
	return AdminResponse{RoomID: req.RoomID, State: &st, EventID: ev.ID}, nil
}

// adminHide hides a user in a room for a duration (shadow hide): the
// user's sends are accepted as before, and reach only the user's own
// connections to the room. It holds on this logic at once and on every
// logic within half a second; messages accepted before it stay visible.
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
	s.send.RefreshRoom(ctx, req.RoomID, now)
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
		s.send.RefreshRoom(ctx, req.RoomID, time.Now())
	}
	return resp, err
}
