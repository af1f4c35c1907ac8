package logic

import (
	"fmt"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/wordfilter"
)

// authenticate returns the sender's verified claims, or nil with auth off.
// With auth on, a request without "Authorization: Bearer <JWT>", or with a
// token that fails verification, is a 401.
func (s *Server) authenticate(r *http.Request) (*auth.Claims, error) {
	if s.verifier == nil {
		return nil, nil
	}
	tok := auth.BearerToken(r)
	if tok == "" {
		s.m.observeRefused("token")
		return nil, danmaku.Errorf(danmaku.EUNAUTH, "Authorization", "missing; send Authorization: Bearer <token>")
	}
	c, err := s.verifier.Verify(tok)
	if err != nil {
		s.m.observeRefused("token")
		return nil, err
	}
	return &c, nil
}

// authorizeRead guards a read of a room's data (its history, its viewer
// count) as /ws and /logic/send are guarded: with auth on, a verified token
// (401 without one) that allows the room (403 naming roomId). With auth off
// anybody may read, as anybody may join.
func (s *Server) authorizeRead(r *http.Request, room string) error {
	c, err := s.authenticate(r)
	if err != nil || c == nil {
		return err
	}
	if !c.AllowsRoom(room) {
		s.m.observeRefused("forbidden")
		return danmaku.Errorf(danmaku.CodeForbidden, "roomId", "the token does not allow this room")
	}
	return nil
}

// applyClaims makes the token, not the body, say who sends: the user id and
// name are the token's (a token without a name shows the user id), a body
// userId that names somebody else is refused, and so is a room the token
// does not allow. Message ids are namespaced by the token's user in
// validate, so another user's idempotency keys cannot be reached.
func (s *Server) applyClaims(req *SendRequest, c *auth.Claims) error {
	if req.UserID != 0 && req.UserID != c.UID {
		s.m.observeRefused("forbidden")
		return danmaku.Errorf(danmaku.CodeForbidden, "userId", "does not match the token's user")
	}
	if req.RoomID != "" && !c.AllowsRoom(req.RoomID) {
		s.m.observeRefused("forbidden")
		return danmaku.Errorf(danmaku.CodeForbidden, "roomId", "the token does not allow this room")
	}
	req.UserID = c.UID
	req.UserName = c.Name
	if req.UserName == "" {
		req.UserName = strconv.FormatInt(c.UID, 10)
	}
	return nil
}

// filterWords applies the blocked-word list to the user name and every
// comment: reject refuses the request naming the first field with a match
// (400 content_blocked), mask replaces the words in place.
func (s *Server) filterWords(req *SendRequest) error {
	if s.words.Mode() == wordfilter.ModeOff {
		return nil
	}
	name, err := s.words.Apply("userName", req.UserName)
	if err != nil {
		s.m.observeRefused("blocked")
		return err
	}
	req.UserName = name
	for i := range req.Messages {
		m := &req.Messages[i]
		content, err := s.words.Apply(fmt.Sprintf("messages[%d].content", i), m.Content)
		if err != nil {
			s.m.observeRefused("blocked")
			return err
		}
		m.Content = content
	}
	return nil
}

// ReloadWords reads the blocked-word list again (the binaries call it on
// SIGHUP and the admin API on request). On error the list in use stays.
func (s *Server) ReloadWords() error {
	if err := s.words.Reload(); err != nil {
		return err
	}
	s.log.Info("blocked words reloaded", zap.String("mode", s.words.Mode()), zap.Int("words", s.words.Len()))
	return nil
}
