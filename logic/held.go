package logic

import (
	"net/http"

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
	room, limit, ok := s.adminRead(w, r, readQuery{Name: "held", Action: "delete", Room: true, Limit: 100, Max: maxHeldRead})
	if !ok {
		return
	}
	ctx, cancel := s.redisCtx(r)
	items, err := s.store.HeldList(ctx, room, limit)
	cancel()
	if err != nil {
		httpx.WriteError(w, s.redisError("held list", err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, danmaku.HeldResponse{RoomID: room, Items: items})
}
