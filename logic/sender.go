package logic

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
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

// ReloadWords reads the blocked-word list again (the binaries call it on
// SIGHUP and the admin API on request) and writes the send path's rules
// to Redis for the comets at once. On error the list in use stays.
func (s *Server) ReloadWords() error {
	if err := s.words.Reload(); err != nil {
		return err
	}
	s.log.Info("blocked words reloaded", zap.String("mode", s.words.Mode()), zap.Int("words", s.words.Len()))
	if err := s.send.PublishRules(context.Background()); err != nil {
		s.log.Warn("send rules not written to Redis; the comets get them at the next refresh", zap.Error(err))
	}
	return nil
}
