package comet

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/push"
)

// servePush is job's endpoint: POST /push with a danmaku.Push body (a
// danmaku.Batch, a danmaku.Event: del, ban, state, shadow, pin, unpin, a
// danmaku.NoticePush: user,
// all, or a danmaku.CanaryPush, recorded and sent to no viewer: canary.go),
// decoded as one typed shape by danmaku.UnmarshalPush. It answers
// only after the batch, the event or the notices were handed to every
// local viewer's queue.
func (s *Server) servePush(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpx.WriteError(w, danmaku.Errorf(danmaku.CodeMethod, "", "use POST"))
		return
	}
	if s.isClosing() {
		s.metrics.observePush("shutting_down", 0, 0, 0)
		httpx.WriteError(w, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "comet is shutting down"))
		return
	}
	if !checkBearer(r, s.cfg.Secret) {
		s.metrics.observePush("unauthorized", 0, 0, 0)
		httpx.WriteError(w, danmaku.Errorf(danmaku.EUNAUTH, "authorization", "wrong or missing push secret"))
		return
	}
	b, err := readPush(w, r, s.cfg.MaxPushBytes)
	if err != nil {
		s.metrics.observePush("bad_request", 0, 0, 0)
		httpx.WriteError(w, err)
		return
	}
	var n int
	switch {
	case b.Notices != nil:
		var dups int
		n, dups = s.deliverNotices(b.Notices)
		s.metrics.notices.WithLabelValues(b.Op()).Add(float64(noticeCount(b.Notices)))
		s.metrics.observePush("ok", time.Since(start), n, dups)
	case b.Event != nil && b.Event.Op == danmaku.OpDel:
		s.metrics.events.WithLabelValues(b.Op()).Inc()
		n = s.deleteMsgs(*b.Event)
	case b.Event != nil && b.Event.Op == danmaku.OpShadow:
		s.metrics.events.WithLabelValues(b.Op()).Inc()
		n = s.applyShadow(*b.Event)
	case b.Event != nil && (b.Event.Op == danmaku.OpPin || b.Event.Op == danmaku.OpUnpin):
		s.metrics.events.WithLabelValues(b.Op()).Inc()
		n = s.applyPin(*b.Event)
	case b.Event != nil && b.Event.Op == danmaku.OpState:
		s.metrics.events.WithLabelValues(b.Op()).Inc()
		n = s.applyState(*b.Event)
	case b.Event != nil:
		s.metrics.events.WithLabelValues(b.Op()).Inc()
		n = s.banUser(*b.Event)
	case b.Canaries != nil:
		for _, c := range b.Canaries.Canaries {
			s.canary.observe(c, start)
		}
	default:
		var dups int
		n, dups = s.broadcast(*b.Batch)
		s.metrics.observePush("ok", time.Since(start), n, dups)
		s.settingsBehind(b.Batch.Room, b.Batch.Sv)
	}
	if b.Event != nil {
		s.settingsBehind(b.Event.Room, b.Event.Sv)
	}
	httpx.WriteJSON(w, http.StatusOK, push.Response{Delivered: n})
}

// readPush reads and decodes a push body (danmaku.UnmarshalPush).
func readPush(w http.ResponseWriter, r *http.Request, limit int64) (danmaku.Push, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return danmaku.Push{}, danmaku.Errorf(danmaku.EINVALID, "body", "larger than %d bytes", limit)
		}
		return danmaku.Push{}, danmaku.Errorf(danmaku.EINVALID, "body", "read body: %v", err)
	}
	return danmaku.UnmarshalPush(body)
}

// Broadcast hands b to every local viewer of b.Room and returns the number
// of viewers it was given to. Messages this comet already sent to the room
// (ids in its ring, positions at or below the last one delivered) are
// dropped; a batch with nothing new is not sent. Messages missing before
// it (a gap in positions, a new epoch) are read from Redis and delivered
// first, in the same frame. It never blocks on a viewer: one whose queue
// is full is caught up later or disconnected.
func (s *Server) Broadcast(b danmaku.Batch) int {
	n, _ := s.broadcast(b)
	return n
}
