package logic

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/sendpath"
)

// MaxMute is the longest mute or ban the admin API sets.
const MaxMute = 365 * 24 * time.Hour

// The admin API. Every route takes POST with a JSON body and
// "Authorization: Bearer <logic.admin_secret>"; every action is logged at
// info with its actor and counted in danmaku_logic_admin_actions_total.
//
//	POST /logic/admin/mute          {"userId","roomId"?,"duration","actor"?}
//	POST /logic/admin/unmute        {"userId","roomId"?,"actor"?}
//	POST /logic/admin/ban           {"userId","roomId","duration","actor"?}
//	POST /logic/admin/unban         {"userId","roomId","actor"?}
//	POST /logic/admin/delete        {"roomId","ids":[...],"actor"?}
//	POST /logic/admin/words/reload  {"actor"?}
//	POST /logic/admin/stream/start  {"roomId","streamId"?,"actor"?}
//	POST /logic/admin/stream/end    {"roomId","streamId"?,"actor"?}
//	POST /logic/admin/send          the body of /logic/send, "priority" allowed (priority.go)
//	POST /logic/admin/room          {"roomId","slowSeconds"?,"membersOnly"?,"uniqueSeconds"?,"actor"?}
//	POST /logic/admin/hide          {"userId","roomId","duration","actor"?}
//	POST /logic/admin/unhide        {"userId","roomId","actor"?}
//	POST /logic/admin/pin           {"roomId","ids":[msgId]|"content","duration"?,"amount"?,"actor"?}
//	POST /logic/admin/unpin         {"roomId","ids":[pinId],"actor"?}
//	GET  /logic/admin/audit?roomId=&limit=  the audit log, newest first
//	GET  /logic/admin/lists?roomId=         what is in force: settings, mutes, bans, hides, pin (lists.go)
//	GET  /logic/admin/review?roomId=&limit= the room's review queue (review.go)
//	POST /logic/admin/review/approve        {"roomId","ids":[...],"actor"?}
//	POST /logic/admin/review/reject         {"roomId","ids":[...],"actor"?}
//	GET  /logic/admin/rooms?roomId=...      rooms, viewers, timeline heads (rooms.go)
//	GET  /logic/admin/held?roomId=&limit=   the comments the room's delay holds (held.go)
//	GET  /logic/admin/words?roomId=         the edited blocked words of a room or global (words.go)
//	POST /logic/admin/words/add             {"roomId"?,"words":[...],"mode"?,"actor"?}
//	POST /logic/admin/words/remove          {"roomId"?,"words":[...],"actor"?}
//
// A token with the moderator role may run the room actions on its rooms
// instead of the secret (moderators.go). Ban and delete are in
// moderation.go, streams in vod.go, room settings in roomstate.go.
func (s *Server) handleAdmin() {
	s.handleOn(s.adminMux, "/logic/admin/mute", "admin", s.admin("mute", s.adminMute))
	s.handleOn(s.adminMux, "/logic/admin/unmute", "admin", s.admin("unmute", s.adminUnmute))
	s.handleOn(s.adminMux, "/logic/admin/ban", "admin", s.admin("ban", s.adminBan))
	s.handleOn(s.adminMux, "/logic/admin/unban", "admin", s.admin("unban", s.adminUnban))
	s.handleOn(s.adminMux, "/logic/admin/delete", "admin", s.admin("delete", s.adminDelete))
	s.handleOn(s.adminMux, "/logic/admin/words/reload", "admin", s.admin("words_reload", s.adminReloadWords))
	s.handleOn(s.adminMux, "/logic/admin/stream/start", "admin", s.admin("stream_start", s.adminStreamStart))
	s.handleOn(s.adminMux, "/logic/admin/stream/end", "admin", s.admin("stream_end", s.adminStreamEnd))
	s.handleOn(s.adminMux, "/logic/admin/send", "admin", s.serveAdminSend)
	s.handleOn(s.adminMux, "/logic/admin/room", "admin", s.admin("room", s.adminRoom))
	s.handleOn(s.adminMux, "/logic/admin/hide", "admin", s.admin("hide", s.adminHide))
	s.handleOn(s.adminMux, "/logic/admin/unhide", "admin", s.admin("unhide", s.adminUnhide))
	s.handleOn(s.adminMux, "/logic/admin/pin", "admin", s.admin("pin", s.adminPin))
	s.handleOn(s.adminMux, "/logic/admin/unpin", "admin", s.admin("unpin", s.adminUnpin))
	s.handleOn(s.adminMux, "/logic/admin/audit", "admin", s.serveAudit)
	s.handleOn(s.adminMux, "/logic/admin/lists", "admin", s.serveLists)
	s.handleOn(s.adminMux, "/logic/admin/review", "admin", s.serveReview)
	s.handleOn(s.adminMux, "/logic/admin/review/approve", "admin", s.admin("approve", s.adminApprove))
	s.handleOn(s.adminMux, "/logic/admin/review/reject", "admin", s.admin("reject", s.adminReject))
	s.handleOn(s.adminMux, "/logic/admin/rooms", "admin", s.serveRooms)
	s.handleOn(s.adminMux, "/logic/admin/words", "admin", s.serveWords)
	s.handleOn(s.adminMux, "/logic/admin/held", "admin", s.serveHeld)
	s.handleOn(s.adminMux, "/logic/admin/words/add", "admin", s.admin("words_add", s.adminAddWords))
	s.handleOn(s.adminMux, "/logic/admin/words/remove", "admin", s.admin("words_remove", s.adminRemoveWords))
}

// The bodies of the admin routes, declared in the root package.
type (
	AdminRequest  = danmaku.AdminRequest
	AdminResponse = danmaku.AdminResponse
)

// admin wraps an action with the secret check, body decoding, the log line
// and the counter.
func (s *Server) admin(action string, fn func(r *http.Request, req *AdminRequest) (AdminResponse, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		mod, ok := s.adminOrModerator(w, r, action)
		if !ok {
			return
		}
		var req AdminRequest
		err := decodeAdmin(w, r, &req)
		if err == nil && mod != nil {
			err = moderates(mod, action, req.RoomID)
		}
		if err != nil {
			s.m.observeAdmin(action, "error")
			httpx.WriteError(w, err)
			return
		}
		actor := actorOf(mod, req.Actor)
		resp, err := fn(r, &req)
		fields := []zap.Field{zap.String("action", action), zap.String("actor", actor),
			zap.String("remote", r.RemoteAddr), zap.Int64("user", req.UserID), zap.String("room", req.RoomID)}
		if len(req.IDs) > 0 {
			fields = append(fields, zap.Strings("ids", req.IDs))
		}
		if err != nil {
			s.m.observeAdmin(action, "error")
			s.log.Info("admin action failed", append(fields, zap.Error(err))...)
			httpx.WriteError(w, err)
			return
		}
		s.m.observeAdmin(action, "ok")
		if resp.EventID != "" {
			fields = append(fields, zap.String("event", resp.EventID))
		}
		s.log.Info("admin action", append(fields, zap.String("duration", req.Duration))...)
		resp.Action = action
		s.audit(r.Context(), actor, &req, &resp)
		httpx.WriteJSON(w, http.StatusOK, resp)
	}
}

// adminAllowed checks the admin secret of r (checkAdmin); a refusal is
// answered, counted and logged, and reported as false.
func (s *Server) adminAllowed(w http.ResponseWriter, r *http.Request, action string) bool {
	result, err := s.checkAdmin(r)
	if err == nil {
		return true
	}
	s.m.observeAdmin(action, result)
	s.log.Info("admin request refused", zap.String("action", action), zap.String("result", result),
		zap.String("remote", r.RemoteAddr))
	httpx.WriteError(w, err)
	return false
}

// checkAdmin compares the request's bearer token with logic.admin_secret
// in constant time (over SHA-256 digests, so the length does not leak
// either). No secret configured: the API is off for everybody (403).
func (s *Server) checkAdmin(r *http.Request) (result string, err error) {
	if s.cfg.AdminSecret == "" {
		return "disabled", danmaku.Errorf(danmaku.CodeForbidden, "Authorization", "the admin API is off: set logic.admin_secret")
	}
	tok := auth.BearerToken(r)
	if tok == "" {
		return "unauthenticated", danmaku.Errorf(danmaku.EUNAUTH, "Authorization", "missing; send Authorization: Bearer <logic.admin_secret>")
	}
	got, want := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(s.cfg.AdminSecret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return "unauthenticated", danmaku.Errorf(danmaku.EUNAUTH, "Authorization", "wrong admin secret")
	}
	return "", nil
}

// adminMaxBody bounds an admin request's body: a delete of the most ids
// (danmaku.MaxDelIDs of up to 64 characters) fits.
const adminMaxBody = 16 << 10

func decodeAdmin(w http.ResponseWriter, r *http.Request, req *AdminRequest) error {
	if r.ContentLength == 0 {
		return nil // routes without arguments may be called without a body
	}
	if err := checkJSONType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, adminMaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return decodeError(err, "", adminMaxBody)
	}
	if req.RoomID != "" {
		if err := danmaku.CheckID("roomId", req.RoomID); err != nil {
			return err
		}
	}
	return sendpath.CheckText("actor", orDefault(req.Actor, "-"), 64, false)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func requireUser(req *AdminRequest) error { return sendpath.CheckUserID("userId", req.UserID) }

// adminMute mutes a user in a room, or everywhere without roomId: their
// sends get 403 muted until the duration ends.
func (s *Server) adminMute(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := requireUser(req); err != nil {
		return AdminResponse{}, err
	}
	d, err := parseSanction(req.Duration)
	if err != nil {
		return AdminResponse{}, err
	}
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	until := time.Now().Add(d)
	if err := s.store.Mute(ctx, strconv.FormatInt(req.UserID, 10), req.RoomID, d); err != nil {
		return AdminResponse{}, s.redisError("mute", err)
	}
	return AdminResponse{UserID: req.UserID, RoomID: req.RoomID, Until: until.UnixMilli()}, nil
}

// parseSanction parses the duration of a mute or a ban: 1s to MaxMute.
func parseSanction(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second || d > MaxMute {
		return 0, danmaku.Errorf(danmaku.EINVALID, "duration", "want a duration between 1s and %v, like \"10m\"", MaxMute)
	}
	return d, nil
}

// adminUnmute lifts a mute in a room, or the mute everywhere without
// roomId (room mutes stay).
func (s *Server) adminUnmute(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := requireUser(req); err != nil {
		return AdminResponse{}, err
	}
	return s.lift(r, req, "unmute", s.store.Unmute)
}

// lift runs an unmute or an unban: fn lifts the sanction of the request's
// user in its room and reports whether there was one.
func (s *Server) lift(r *http.Request, req *AdminRequest, op string, fn func(ctx context.Context, user, room string) (bool, error)) (AdminResponse, error) {
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	removed, err := fn(ctx, strconv.FormatInt(req.UserID, 10), req.RoomID)
	if err != nil {
		return AdminResponse{}, s.redisError(op, err)
	}
	return AdminResponse{UserID: req.UserID, RoomID: req.RoomID, Removed: &removed}, nil
}

// adminReloadWords reads the blocked-word list again, as SIGHUP does.
func (s *Server) adminReloadWords(_ *http.Request, _ *AdminRequest) (AdminResponse, error) {
	if err := s.ReloadWords(); err != nil {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "blocked_words", "%v", err)
	}
	n := s.words.Len()
	return AdminResponse{Mode: s.words.Mode(), Words: &n}, nil
}
