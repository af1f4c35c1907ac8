package logic

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// ListsResponse is the answer of GET /logic/admin/lists, declared in the
// root package.
type ListsResponse = danmaku.ListsResponse

// serveLists is GET /logic/admin/lists[?roomId=R]: the room's settings,
// active mutes, bans and hides and its pin, or without roomId the mutes
// and bans of the whole service (admin secret only). A moderator names
// one of its rooms. Two reads: the room's settings hash and its sanction
// set (route.Sanctions).
func (s *Server) serveLists(w http.ResponseWriter, r *http.Request) {
	room, _, ok := s.adminRead(w, r, readQuery{Name: "lists", Action: "room"})
	if !ok {
		return
	}
	resp, err := s.lists(r, room)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

// lists reads what is in force in room ("" the service).
func (s *Server) lists(r *http.Request, room string) (ListsResponse, error) {
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	resp := ListsResponse{RoomID: room, Mutes: []danmaku.Sanctioned{}, Bans: []danmaku.Sanctioned{}, Hidden: []danmaku.Sanctioned{}}
	xs, err := s.store.Sanctions(ctx, room)
	if err != nil {
		return resp, s.redisError("sanctions", err)
	}
	for _, x := range xs {
		uid, err := strconv.ParseInt(x.User, 10, 64)
		if err != nil {
			continue
		}
		e := danmaku.Sanctioned{User: uid, Until: x.Until}
		if room == "" {
			e.RoomID = x.Room
		}
		if x.Kind == "ban" {
			resp.Bans = append(resp.Bans, e)
		} else {
			resp.Mutes = append(resp.Mutes, e)
		}
	}
	if room == "" {
		return resp, nil
	}
	rd, err := s.store.ReadRoom(ctx, room)
	if err != nil {
		return resp, s.redisError("read room", err)
	}
	now := time.Now()
	resp.Settings = &rd.State
	if rd.Pin != nil && rd.Pin.Until > now.UnixMilli() {
		resp.Pin = rd.Pin
	}
	for user := range rd.Hidden {
		uid, err := strconv.ParseInt(user, 10, 64)
		if until := rd.HiddenUntil(user, now); err == nil && until > 0 {
			resp.Hidden = append(resp.Hidden, danmaku.Sanctioned{User: uid, Until: until})
		}
	}
	slices.SortFunc(resp.Hidden, func(a, b danmaku.Sanctioned) int { return cmp.Compare(a.Until, b.Until) })
	return resp, nil
}
