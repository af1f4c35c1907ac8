package logic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/sendpath"
)

// Notices: messages to one user on every tab, or to every viewer.
//
//	POST /logic/push/user  {"userId","messages":[{"content"?,"data"?,"msgId"?}]}
//	POST /logic/broadcast  {"messages":[{"content"?,"data"?,"msgId"?}]}
//	                       202 {"msgIds":[...]} in request order
//
// Both take "Authorization: Bearer <logic.admin_secret>" (checkAdmin: 401
// without or with a wrong secret, 403 while the admin API is off). They are
// the service's own senders (a gift, a removed comment, an announcement),
// so there is no rate limit and no blocked-word check, and unlike the
// moderation routes they log no line per request: a site may push
// thousands a second. Each message has content (text, checked like a
// comment), data (a JSON object of at most MaxNoticeData bytes, passed to
// the page as it is), or both. The body is validated like a send (400
// naming the field, 413, 415), each message gets an id (a msgId is an
// idempotency key, namespaced "to<userId>-" or "all-") and the server
// time, and the answer is 202 once Kafka acknowledged every message: the
// record key is danmaku.UserKey(userId) or danmaku.BroadcastKey, so a
// user's notices stay in order on one partition.

// MaxNoticeData is the largest data object of a notice, in bytes of its
// compact JSON.
const MaxNoticeData = 4096

// The bodies of the notice routes, declared in the root package.
type (
	NoticeRequest = danmaku.NoticeRequest
	NoticeMessage = danmaku.NoticeMessage
)

// noticeWire is a NoticeRequest as first decoded; see sendWire.
type noticeWire struct {
	UserID   *int64            `json:"userId"`
	Messages []json.RawMessage `json:"messages"`
}

type noticeMessageWire struct {
	Content contentText     `json:"content"`
	Data    json.RawMessage `json:"data"`
	MsgID   string          `json:"msgId"`
}

func (s *Server) handleNotices() {
	s.handleOn(s.adminMux, "/logic/push/user", "push_user", s.serveNotice("push_user", true))
	s.handleOn(s.adminMux, "/logic/broadcast", "broadcast", s.serveNotice("broadcast", false))
}

// serveNotice serves a push to a user (toUser) or a broadcast.
func (s *Server) serveNotice(action string, toUser bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		if !s.adminAllowed(w, r, action) {
			return
		}
		req, err := decodeNotice(w, r, s.cfg.MaxBodyBytes, toUser)
		var ids []string
		if err == nil {
			ids, err = validateNotices(s.cfg.Limits(), &req, toUser)
		}
		if err == nil {
			err = s.produceNotices(r.Context(), &req, toUser, ids)
		}
		if err != nil {
			s.m.observeAdmin(action, "error")
			httpx.WriteError(w, err)
			return
		}
		s.m.observeAdmin(action, "ok")
		s.m.observeNotices(action, len(ids))
		httpx.WriteJSON(w, http.StatusAccepted, SendResponse{MsgIDs: ids})
	}
}

// decodeNotice reads a notice request; unknown fields are refused, and so
// is a userId in a broadcast.
func decodeNotice(w http.ResponseWriter, r *http.Request, limit int64, toUser bool) (NoticeRequest, error) {
	var req NoticeRequest
	var wire noticeWire
	if err := decodeBody(w, r, limit, &wire); err != nil {
		return req, err
	}
	switch {
	case toUser && wire.UserID == nil:
		return req, danmaku.Errorf(danmaku.EINVALID, "userId", "must be a positive integer")
	case toUser:
		req.UserID = *wire.UserID
	case wire.UserID != nil:
		return req, danmaku.Errorf(danmaku.EINVALID, "userId", "a broadcast goes to everyone; use /logic/push/user for one user")
	}
	if wire.Messages != nil {
		req.Messages = make([]NoticeMessage, len(wire.Messages))
	}
	for i, raw := range wire.Messages {
		var m noticeMessageWire
		if err := decodeItem(raw, i, limit, &m); err != nil {
			return req, err
		}
		req.Messages[i] = NoticeMessage{Content: string(m.Content), Data: m.Data, MsgID: m.MsgID}
	}
	return req, nil
}

// validateNotices checks req and returns the message ids to use:
// namespaced client ids where given, "" where the server assigns one. Data
// is compacted in place.
func validateNotices(l sendpath.Limits, req *NoticeRequest, toUser bool) ([]string, error) {
	prefix := "all-"
	if toUser {
		if err := sendpath.CheckUserID("userId", req.UserID); err != nil {
			return nil, err
		}
		prefix = "to" + strconv.FormatInt(req.UserID, 10) + "-"
	}
	if err := l.CheckCount(len(req.Messages)); err != nil {
		return nil, err
	}
	ids := make([]string, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		field := fmt.Sprintf("messages[%d]", i)
		if m.Content == "" && isNull(m.Data) {
			return nil, danmaku.Errorf(danmaku.EINVALID, field+".content", "a message needs content, data or both")
		}
		if m.Content != "" {
			if err := sendpath.CheckText(field+".content", m.Content, l.MaxContent, true); err != nil {
				return nil, err
			}
		}
		data, err := checkData(field+".data", m.Data)
		if err != nil {
			return nil, err
		}
		m.Data = data
		if m.MsgID == "" {
			continue
		}
		id, err := sendpath.NamespacedID(field+".msgId", prefix, m.MsgID)
		if err != nil {
			return nil, err
		}
		if ids[i], err = sendpath.Once(ids[:i], id, field+".msgId"); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// checkData returns a notice's data compacted, nil when absent or null.
// It must be a JSON object of valid UTF-8 and at most MaxNoticeData bytes.
func checkData(field string, raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	if !utf8.Valid(raw) {
		return nil, danmaku.Errorf(danmaku.EINVALID, field, "not valid UTF-8")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
		return nil, danmaku.Errorf(danmaku.EINVALID, field, "must be a JSON object")
	}
	if b.Len() > MaxNoticeData {
		return nil, danmaku.Errorf(danmaku.EINVALID, field, "larger than %d bytes (%d)", MaxNoticeData, b.Len())
	}
	return b.Bytes(), nil
}

// produceNotices assigns ids and the server time and writes the notices in
// one write, answering once Kafka acknowledged all of them.
func (s *Server) produceNotices(ctx context.Context, req *NoticeRequest, toUser bool, ids []string) error {
	ts := time.Now()
	user, key := "", []byte(danmaku.BroadcastKey)
	if toUser {
		user = strconv.FormatInt(req.UserID, 10)
		key = []byte(danmaku.UserKey(user))
	}
	values := make([][]byte, len(req.Messages))
	for i, m := range req.Messages {
		if ids[i] == "" {
			ids[i] = s.ids.Next()
		}
		value, err := danmaku.MarshalNotice(user, danmaku.Notice{ID: ids[i], TS: ts.UnixMilli(), Content: m.Content, Data: m.Data})
		if err != nil {
			return fmt.Errorf("encode notice: %w", err)
		}
		values[i] = value
	}
	if err := s.write(ctx, key, ts, values...); err != nil {
		s.log.Warn("kafka produce of notices failed", zap.String("key", string(key)), zap.Int("messages", len(values)), zap.Error(err))
		return danmaku.Unavailable("kafka unavailable, notice not accepted; retry with the same msgId", err)
	}
	return nil
}
