package logic

import (
	"context"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/unitext"
	"github.com/danmaku/danmaku/route"
)

// checkSend runs every check of a decoded send, in order: the token's
// claims (auth on) and its right to the priority asked for, validation
// (ids assigned to messages without one), blocked words, the room's
// members-only mode, the high-priority budget, bans, mutes and rate
// limits, then the room's slow mode and unique chat. It is the one send
// check of the service: /logic/send calls it and so does any other way in
// for comments. claims is nil with auth off. A refusal is an error with,
// for a 429, the wait in whole seconds for Retry-After.
//
// Moderators of the room (the moderator role of a token allowing the
// room) are exempt from the room's modes, not from the rest. A send of a
// user hidden in the room (shadow hide) passes like any other: only its
// delivery differs (checked.shadow), so the sender cannot tell.
func (s *Server) checkSend(ctx context.Context, claims *auth.Claims, ip string, req *SendRequest) (c checked, retryAfter int64, err error) {
	if claims != nil {
		if err := s.applyClaims(req, claims); err != nil {
			return c, 0, err
		}
	}
	if err := s.allowPriority(req, claims); err != nil {
		return c, 0, err
	}
	if c.ids, err = s.lim.validate(req); err != nil {
		return c, 0, err
	}
	if err := s.filterWords(req); err != nil {
		return c, 0, err
	}
	room, err := s.roomState(ctx, req.RoomID)
	if err != nil {
		return c, 0, err
	}
	st := room.State
	mod := isModerator(claims, req.RoomID)
	if st.MembersOnly && !mod && (claims == nil || !claims.HasRole(auth.RoleMember)) {
		s.m.observeRefused("members_only")
		return c, 0, danmaku.Errorf(danmaku.CodeMembers, "roomId", "the room is members-only: send with a token that has the %s role", auth.RoleMember)
	}
	if retryAfter, err = s.takeHigh(ctx, req); err != nil {
		return c, retryAfter, err
	}
	if retryAfter, err = s.admit(ctx, ip, req); err == nil && !mod && (st.SlowSeconds > 0 || st.UniqueSeconds > 0) {
		retryAfter, err = s.pace(ctx, st, req)
	}
	if err != nil {
		s.giveBackHigh(ctx, req)
		return c, retryAfter, err
	}
	c.shadow = room.HiddenUntil(strconv.FormatInt(req.UserID, 10), time.Now()) > 0
	return c, 0, nil
}

// checked is a send that passed checkSend: the id of every message, and
// whether its sender is hidden in the room (its messages go to the
// sender's own connections only, as shadow events).
type checked struct {
	ids    []string
	shadow bool
}

// isModerator reports whether claims moderate room: the moderator role,
// and room within the token's rooms.
func isModerator(c *auth.Claims, room string) bool {
	return c != nil && c.HasRole(auth.RoleModerator) && c.AllowsRoom(room)
}

// pace checks the room's slow mode and unique chat (route.CheckPace, one
// script on the room's shard) once the send passed its rate limits: slow
// mode refuses a send within SlowSeconds of the user's last one in the
// room (429 slow_mode, Retry-After the rest of the interval) and a request
// of more than one message; unique chat refuses a message whose plain
// form (unitext.Plain) was sent to the room in the last UniqueSeconds (409
// duplicate_content naming it).
func (s *Server) pace(ctx context.Context, st danmaku.RoomState, req *SendRequest) (retryAfter int64, err error) {
	if st.SlowSeconds > 0 && len(req.Messages) > 1 {
		s.m.observeRefused("slow_mode")
		return 0, danmaku.Errorf(danmaku.EINVALID, "messages", "slow mode: one message per request")
	}
	p := route.Pace{Room: req.RoomID, User: strconv.FormatInt(req.UserID, 10),
		Slow: time.Duration(st.SlowSeconds) * time.Second, Unique: time.Duration(st.UniqueSeconds) * time.Second}
	if st.UniqueSeconds > 0 {
		p.Plain = make([]string, len(req.Messages))
		for i, m := range req.Messages {
			p.Plain[i] = unitext.Plain(m.Content)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	v, err := s.store.CheckPace(ctx, p)
	switch {
	case err != nil:
		return 0, s.redisError("pace", err)
	case v.Wait > 0:
		s.m.observeRefused("slow_mode")
		secs := max(int64((v.Wait+time.Second-1)/time.Second), 1)
		return secs, danmaku.Errorf(danmaku.CodeSlowMode, "userId", "slow mode: one message every %d s in this room; retry in %d s", st.SlowSeconds, secs)
	case v.Repeat >= 0:
		s.m.observeRefused("duplicate")
		return 0, danmaku.Errorf(danmaku.CodeDuplicate, "messages["+strconv.Itoa(v.Repeat)+"].content",
			"unique chat: the same comment was sent to this room in the last %d s", st.UniqueSeconds)
	}
	return 0, nil
}
