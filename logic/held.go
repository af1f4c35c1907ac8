package logic

import (
	"net/http"
	"strconv"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// Held comments of a room's non-moderator delay. Job holds them until
// their release and lists them in Redis (route.PublishHeld); moderators
// read the list and delete a comment there with POST /logic/admin/delete,
// which takes it off the list and makes job drop it: it never reaches a
// viewer nor the history.
//
//	GET /logic/admin/held?roomId=R[&limit=N]  {"roomId","items":[{"id","uid","name","content","ts","releaseAt"}]}

// maxHeldRead is the most comments one GET /logic/admin/held answers.
const maxHeldRead = 500

// serveHeld is GET /logic/admin/held?roomId=R[&limit=N]: the first N (100,
// at most 500) comments the room holds, soonest released first. A
// moderator names one of its rooms.
func (s *Server) serveHeld(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	mod, ok := s.adminOrModerator(w, r, "held")
	if !ok {
		return
	}
	q := r.URL.Query()
	room, limit := q.Get("roomId"), 100
	err := danmaku.CheckID("roomId", room)
	if v := q.Get("limit"); err == nil && v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxHeldRead {
			err = danmaku.Errorf(danmaku.EINVALID, "limit", "want 1 to %d", maxHeldRead)
		}
	}
	if err == nil && mod != nil {
		err = moderates(mod, "delete", room)
	}
	var items []danmaku.HeldItem
	if err == nil {
		ctx, cancel := s.redisCtx(r)
		items, err = s.store.HeldList(ctx, room, limit)
		cancel()
		if err != nil {
			err = s.redisError("held list", err)
		}
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, danmaku.HeldResponse{RoomID: room, Items: items})
}
