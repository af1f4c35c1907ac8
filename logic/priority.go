package logic

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/internal/sendpath"
)

// The high lane (sendpath): a send asks for it with "priority":1, from a
// token with the moderator or priority role, or through the admin send
// below; every high-priority message takes a token of its room's bucket.

// serveAdminSend is POST /logic/admin/send: the body of /logic/send, from
// the backend with the admin secret. The user id and name are the body's
// (a system account, or the user a paid message is from), priority may be
// high, and the sender's own checks (rate limits, mutes, bans) do not
// apply; validation, blocked words and the room's high-priority bucket do.
func (s *Server) serveAdminSend(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) || !s.adminAllowed(w, r, "send") {
		return
	}
	req, err := decodeSend(w, r, s.cfg.MaxBodyBytes)
	var c sendpath.Checked
	var retry int64
	if err == nil {
		c, retry, err = s.send.CheckAdmin(r.Context(), &req)
	}
	if err != nil {
		s.m.observeAdmin("send", "error")
		writeRetry(w, retry, err)
		return
	}
	result := "ok"
	if s.accept(w, r, &req, c) != nil {
		result = "error"
	}
	s.m.observeAdmin("send", result)
	s.log.Info("admin action", zap.String("action", "send"), zap.String("result", result), zap.String("remote", r.RemoteAddr),
		zap.Int64("user", req.UserID), zap.String("room", req.RoomID), zap.Int("messages", len(req.Messages)),
		zap.Stringer("priority", req.Priority))
}
