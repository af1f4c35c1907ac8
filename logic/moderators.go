package logic

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/httpx"
)

// Moderators and the audit log.
//
// Besides the admin secret (for backends), the admin API takes a viewer's
// token with the moderator role (with logic.auth jwt): it may run the
// actions of modActions on the rooms its rooms claim allows, each request
// naming its room (roomId). Its actor is its user, whatever the body says.
// Everything else (a mute everywhere, the blocked words, notices) needs the
// secret.
//
// Every admin action that succeeded is appended to the audit log (who,
// what, when, on which room and user), read newest first with
// GET /logic/admin/audit; a moderator reads the entries of its rooms.

// modActions are the admin actions a moderator token may run.
var modActions = []string{"mute", "unmute", "ban", "unban", "delete", "room", "hide", "unhide", "pin", "unpin", "approve", "reject", "words_add", "words_remove"}

// AuditSize is how many of the newest admin actions the audit log keeps.
const AuditSize = 10000

// adminOrModerator authorizes an admin request: the admin secret (nil
// claims), or a token with the moderator role (its claims). A refusal is
// answered, counted and logged, and reported as false.
func (s *Server) adminOrModerator(w http.ResponseWriter, r *http.Request, action string) (*auth.Claims, bool) {
	result, err := s.checkAdmin(r)
	if err == nil {
		return nil, true
	}
	if tok := auth.BearerToken(r); s.verifier != nil && tok != "" {
		if c, verr := s.verifier.Verify(tok); verr == nil && c.HasRole(auth.RoleModerator) {
			return &c, true
		}
	}
	s.m.observeAdmin(action, result)
	s.log.Info("admin request refused", zap.String("action", action), zap.String("result", result),
		zap.String("remote", r.RemoteAddr))
	httpx.WriteError(w, err)
	return nil, false
}

// moderates reports whether the moderator c may run action on room: an
// action of modActions, on a room (not everywhere) its token allows.
func moderates(c *auth.Claims, action, room string) error {
	if !slices.Contains(modActions, action) {
		return danmaku.Errorf(danmaku.CodeForbidden, "Authorization", "a moderator token may not %s; use the admin secret", action)
	}
	if room == "" {
		return danmaku.Errorf(danmaku.CodeForbidden, "roomId", "a moderator acts on one of its rooms: name it")
	}
	if !c.AllowsRoom(room) {
		return danmaku.Errorf(danmaku.CodeForbidden, "roomId", "the token does not moderate this room")
	}
	return nil
}

// actorOf names who ran an admin action: a moderator's user, or the
// request's actor for the admin secret ("unnamed" when it gives none).
func actorOf(mod *auth.Claims, actor string) string {
	switch {
	case mod != nil:
		return "user:" + strconv.FormatInt(mod.UID, 10)
	case actor == "":
		return "unnamed"
	}
	return actor
}

// audit appends the action to the audit log. A Redis that does not answer
// costs the entry (logged), not the action, which is done.
func (s *Server) audit(ctx context.Context, actor string, req *AdminRequest, resp *AdminResponse) {
	e := danmaku.AuditEntry{TS: time.Now().UnixMilli(), Actor: actor, Action: resp.Action, RoomID: req.RoomID,
		UserID: req.UserID, Duration: req.Duration, IDs: resp.IDs, EventID: resp.EventID, State: resp.State}
	if strings.HasPrefix(resp.Action, "words_") {
		e.Words, e.Mode = req.Words, req.Mode
	}
	b, err := json.Marshal(e)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RedisTimeout)
		defer cancel()
		err = s.store.AppendAudit(ctx, b, AuditSize)
	}
	if err != nil {
		s.log.Warn("audit log entry lost", zap.String("action", resp.Action), zap.String("actor", actor), zap.Error(err))
	}
}

// readQuery is what an admin GET reads of its query: its roomId (Room
// required, or "" for everywhere) and its limit (Limit by default, 1 to
// Max; none read when Max is 0), checked against a moderator's right to
// Action on the room.
type readQuery struct {
	Name, Action string
	Room         bool
	Limit, Max   int
}

// adminRead starts an admin GET of q: the method, the secret or a
// moderator token, and the query. A refusal is answered; ok is false then.
func (s *Server) adminRead(w http.ResponseWriter, r *http.Request, q readQuery) (room string, limit int, ok bool) {
	if !allowMethod(w, r, http.MethodGet) {
		return "", 0, false
	}
	mod, ok := s.adminOrModerator(w, r, q.Name)
	if !ok {
		return "", 0, false
	}
	v := r.URL.Query()
	room, limit = v.Get("roomId"), q.Limit
	var err error
	if room != "" || q.Room {
		err = danmaku.CheckID("roomId", room)
	}
	if l := v.Get("limit"); err == nil && l != "" && q.Max > 0 {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > q.Max {
			err = danmaku.Errorf(danmaku.EINVALID, "limit", "want 1 to %d", q.Max)
		}
	}
	if err == nil && mod != nil {
		err = moderates(mod, q.Action, room)
	}
	if err != nil {
		httpx.WriteError(w, err)
		return "", 0, false
	}
	return room, limit, true
}

// maxAuditRead is the most entries one GET /logic/admin/audit answers.
const maxAuditRead = 500

// serveAudit is GET /logic/admin/audit[?roomId=R][&limit=N]: the newest
// N (100, at most 500) entries of the audit log, newest first, of room R
// when given. A moderator names one of its rooms.
func (s *Server) serveAudit(w http.ResponseWriter, r *http.Request) {
	room, limit, ok := s.adminRead(w, r, readQuery{Name: "audit", Action: "room", Limit: 100, Max: maxAuditRead})
	if !ok {
		return
	}
	entries, err := s.readAudit(r, room, limit)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, danmaku.AuditResponse{Entries: entries})
}

// readAudit returns the newest limit entries of room (any room when ""),
// newest first, from the whole log.
func (s *Server) readAudit(r *http.Request, room string, limit int) ([]danmaku.AuditEntry, error) {
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	raw, err := s.store.Audit(ctx, AuditSize)
	if err != nil {
		return nil, s.redisError("audit", err)
	}
	out := []danmaku.AuditEntry{}
	for _, b := range raw {
		var e danmaku.AuditEntry
		if json.Unmarshal(b, &e) != nil || room != "" && e.RoomID != room {
			continue
		}
		if out = append(out, e); len(out) == limit {
			break
		}
	}
	return out, nil
}
