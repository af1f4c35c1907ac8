package logic

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/httpx"
)

// maxRoomsListed is the most rooms one GET /logic/admin/rooms answers.
const maxRoomsListed = 100

// serveRooms is GET /logic/admin/rooms[?roomId=R...]: the viewers and the
// timeline head of the rooms named, or without names of the rooms that
// have viewers (up to maxRoomsListed, found by a bounded scan of Redis),
// most viewers first. The moderator console lists rooms with it and
// derives messages a second from the positions. A moderator names rooms
// its token allows; without names it gets the active rooms it moderates
// and the rooms its token names.
func (s *Server) serveRooms(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	mod, ok := s.adminOrModerator(w, r, "rooms")
	if !ok {
		return
	}
	rooms, err := roomsAsked(r, mod)
	var loads []danmaku.RoomLoad
	if err == nil {
		loads, err = s.roomLoads(r, rooms, mod)
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, danmaku.RoomsResponse{Rooms: loads})
}

// roomsAsked returns the rooms a request names, checked.
func roomsAsked(r *http.Request, mod *auth.Claims) ([]string, error) {
	rooms := r.URL.Query()["roomId"]
	if len(rooms) > maxRoomsListed {
		return nil, danmaku.Errorf(danmaku.EINVALID, "roomId", "at most %d rooms", maxRoomsListed)
	}
	for _, room := range rooms {
		if err := danmaku.CheckID("roomId", room); err != nil {
			return nil, err
		}
		if mod != nil {
			if err := moderates(mod, "room", room); err != nil {
				return nil, err
			}
		}
	}
	return rooms, nil
}

// roomLoads reads the loads of rooms, or of the active rooms (those mod
// moderates, and the rooms its token names) when rooms is empty.
func (s *Server) roomLoads(r *http.Request, rooms []string, mod *auth.Claims) ([]danmaku.RoomLoad, error) {
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	if len(rooms) == 0 {
		active, err := s.store.ActiveRooms(ctx, maxRoomsListed)
		if err != nil {
			return nil, s.redisError("rooms", err)
		}
		if mod != nil {
			active = slices.DeleteFunc(active, func(room string) bool { return !mod.AllowsRoom(room) })
			for _, room := range mod.Rooms {
				if !strings.HasSuffix(room, "*") && len(active) < maxRoomsListed && !slices.Contains(active, room) {
					active = append(active, room)
				}
			}
		}
		rooms = active
	}
	got, err := s.store.RoomLoads(ctx, rooms)
	if err != nil {
		return nil, s.redisError("rooms", err)
	}
	out := make([]danmaku.RoomLoad, len(got))
	for i, l := range got {
		out[i] = danmaku.RoomLoad{RoomID: l.Room, Online: l.Online, Epoch: l.Head.Epoch, Pos: l.Head.Last}
	}
	slices.SortFunc(out, func(a, b danmaku.RoomLoad) int {
		return cmp.Or(cmp.Compare(b.Online, a.Online), strings.Compare(a.RoomID, b.RoomID))
	})
	return out, nil
}
