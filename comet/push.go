package comet

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/push"
)

// servePush is job's endpoint: POST /push with a danmaku.Batch body, a
// danmaku.Event (del, ban) or a danmaku.NoticePush (user, all). It answers
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
	switch b.Op {
	case danmaku.OpUser, danmaku.OpAll:
		var dups int
		n, dups = s.deliverNotices(b.notices)
		s.metrics.notices.WithLabelValues(b.Op).Add(float64(noticeCount(b.notices)))
		s.metrics.observePush("ok", time.Since(start), n, dups)
	case danmaku.OpDel:
		s.metrics.events.WithLabelValues(b.Op).Inc()
		n = s.deleteMsgs(b.event())
	case danmaku.OpBan:
		s.metrics.events.WithLabelValues(b.Op).Inc()
		n = s.banUser(b.event())
	default:
		var dups int
		n, dups = s.broadcast(b.Batch)
		s.metrics.observePush("ok", time.Since(start), n, dups)
	}
	httpx.WriteJSON(w, http.StatusOK, push.Response{Delivered: n})
}

// pushBody is a push: a room's msgs frame (danmaku.Batch), or one of its
// events (danmaku.Event: op, room, epoch and dels in the Batch, the rest
// here), or notices (op user or all, decoded apart into notices).
type pushBody struct {
	danmaku.Batch
	ID      string   `json:"id"`
	IDs     []string `json:"ids"`
	User    string   `json:"user"`
	Until   int64    `json:"until"`
	notices *danmaku.NoticePush
}

func (p *pushBody) event() danmaku.Event {
	return danmaku.Event{Op: p.Op, Room: p.Room, ID: p.ID, IDs: p.IDs, User: p.User, Until: p.Until,
		Epoch: p.Epoch, Dels: p.Dels}
}

// readPush decodes and checks a push body.
func readPush(w http.ResponseWriter, r *http.Request, limit int64) (pushBody, error) {
	var b pushBody
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return b, danmaku.Errorf(danmaku.EINVALID, "body", "larger than %d bytes", limit)
		}
		return b, danmaku.Errorf(danmaku.EINVALID, "body", "read body: %v", err)
	}
	if op := pushOp(body); op == danmaku.OpUser || op == danmaku.OpAll {
		b.Op = op
		b.notices, err = readNoticePush(body)
		return b, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return b, danmaku.Errorf(danmaku.EINVALID, "body", "decode batch: %v", err)
	}
	if dec.More() {
		return b, danmaku.Errorf(danmaku.EINVALID, "body", "trailing data after the batch")
	}
	switch b.Op {
	case danmaku.OpDel, danmaku.OpBan:
		ev := b.event()
		return b, ev.Check()
	case danmaku.OpMsgs:
	default:
		return b, danmaku.Errorf(danmaku.EINVALID, "op", "must be %q, %q, %q, %q or %q", danmaku.OpMsgs, danmaku.OpDel, danmaku.OpBan, danmaku.OpUser, danmaku.OpAll)
	}
	if err := danmaku.CheckID("room", b.Room); err != nil {
		return b, err
	}
	for i, m := range b.Msgs {
		if m.ID == "" {
			return b, danmaku.Errorf(danmaku.EINVALID, "msgs["+strconv.Itoa(i)+"].id", "must not be empty")
		}
	}
	return b, nil
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
