package logic

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/route"
)

// The high lane. A send asks for it with "priority":1. Who may:
//
//   - POST /logic/send with a token granting the moderator or the priority
//     role (logic.auth: jwt);
//   - POST /logic/admin/send, the send of the admin API (logic.admin_secret):
//     the backend posting system or paid messages under any user id.
//
// Anybody else is refused with 403 priority_denied. Every high-priority
// message, whoever sends it, takes a token of its room's high-priority
// bucket (logic.high_rate_limit, logic.high_rate_burst; 429 with
// Retry-After beyond it).

// allowPriority refuses high priority to a sender without the right:
// claims is the sender's verified token (nil with auth off).
func (s *Server) allowPriority(req *SendRequest, c *auth.Claims) error {
	if !req.Priority.High() || c != nil && (c.HasRole(auth.RoleModerator) || c.HasRole(auth.RolePriority)) {
		return nil
	}
	s.m.observeRefused("priority")
	if c == nil {
		return danmaku.Errorf(danmaku.CodePriorityDenied, "priority",
			"high priority needs a token with the moderator or priority role (logic.auth: jwt) or POST /logic/admin/send")
	}
	return danmaku.Errorf(danmaku.CodePriorityDenied, "priority", "the token grants neither the moderator nor the priority role")
}

// highBucket is the room's high-priority bucket.
func (s *Server) highBucket() route.Bucket {
	return route.Bucket{Rate: s.cfg.HighRateLimit, Burst: s.cfg.HighRateBurst}
}

// takeHigh takes the tokens of a high-priority request from its room's
// bucket; a refusal is 429 with the wait in whole seconds for Retry-After.
// A normal request takes nothing.
func (s *Server) takeHigh(ctx context.Context, req *SendRequest) (retryAfter int64, err error) {
	if !req.Priority.High() {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	v, err := s.store.TakeHigh(ctx, req.RoomID, len(req.Messages), s.highBucket())
	if err != nil {
		return 0, s.redisError("high rate limit", err)
	}
	if v.Allowed {
		return 0, nil
	}
	s.m.observeRefused("high_rate")
	secs := max(int64((v.RetryAfter+time.Second-1)/time.Second), 1)
	return secs, danmaku.Errorf(danmaku.ERATELIMIT, "priority",
		"the room's high-priority rate limit is exceeded: %g messages per second, burst %d; retry in %d s",
		s.cfg.HighRateLimit, s.cfg.HighRateBurst, secs)
}

// giveBackHigh returns what takeHigh took for a request refused by a later
// check. Best effort: a failure costs the room at most one request's
// tokens.
func (s *Server) giveBackHigh(ctx context.Context, req *SendRequest) {
	if !req.Priority.High() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RedisTimeout)
	defer cancel()
	if err := s.store.GiveBackHigh(ctx, req.RoomID, len(req.Messages), s.highBucket()); err != nil {
		s.log.Debug("give back high-priority tokens", zap.String("room", req.RoomID), zap.Error(err))
	}
}

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
	var ids []string
	if err == nil {
		ids, err = s.lim.validate(&req)
	}
	if err == nil {
		err = s.filterWords(&req)
	}
	var retry int64
	if err == nil {
		retry, err = s.takeHigh(r.Context(), &req)
	}
	if err != nil {
		s.m.observeAdmin("send", "error")
		writeRetry(w, retry, err)
		return
	}
	result := "ok"
	if s.accept(w, r, &req, checked{ids: ids}) != nil {
		result = "error"
	}
	s.m.observeAdmin("send", result)
	s.log.Info("admin action", zap.String("action", "send"), zap.String("result", result), zap.String("remote", r.RemoteAddr),
		zap.Int64("user", req.UserID), zap.String("room", req.RoomID), zap.Int("messages", len(req.Messages)),
		zap.Stringer("priority", req.Priority))
}
