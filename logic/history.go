package logic

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// Limits of GET /logic/history.
const (
	historyDefaultLimit = 50
	historyMaxLimit     = 1000
	// minHistoryBytes is the least logic.history_max_bytes: more than the
	// largest single message, so every answer can hold one.
	minHistoryBytes = 16 << 10
)

// HistoryResponse is the answer of GET /logic/history, declared in the
// root package.
type HistoryResponse = danmaku.HistoryResponse

// historyWire is HistoryResponse as sent: each message encoded once, while
// the answer's size is counted.
type historyWire struct {
	RoomID   string            `json:"roomId"`
	Epoch    string            `json:"epoch"`
	Pos      int64             `json:"pos"`
	Through  int64             `json:"through"`
	More     bool              `json:"more,omitempty"`
	Messages []json.RawMessage `json:"messages"`
}

// serveHistory is GET /logic/history?roomId=R[&since=P][&limit=N]: with
// since, the oldest messages after position P (from the oldest kept when P
// is older); without, the newest limit messages. One Redis script call.
// Guarded like a send (authorizeRead), then limited per client address
// (429 with Retry-After), and cut at logic.history_max_bytes.
func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	room, since, limit, err := historyQuery(r)
	if err == nil {
		err = s.authorizeRead(r, room)
	}
	if err == nil {
		err = s.limitHistory(w, r)
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	resp, err := s.readHistory(r.Context(), room, since, limit)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

// limitHistory takes a read from the client address's bucket; a refusal
// is a 429 error, its wait set as Retry-After on w.
func (s *Server) limitHistory(w http.ResponseWriter, r *http.Request) error {
	ok, retry := s.historyLimit.allow(s.proxies.clientIP(r))
	if ok {
		return nil
	}
	s.m.historyLimited.Inc()
	secs := max(int64((retry+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	return danmaku.Errorf(danmaku.ERATELIMIT, "",
		"history read limit of this client address exceeded: %g requests per second, burst %d; retry in %d s",
		s.cfg.HistoryRateLimit, s.cfg.HistoryRateBurst, secs)
}

// readHistory reads the history and encodes its visible messages until
// logic.history_max_bytes (at least one message always fits).
func (s *Server) readHistory(ctx context.Context, room string, since int64, limit int) (historyWire, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	h, err := s.store.History(ctx, room, since, limit)
	if err != nil {
		return historyWire{}, s.redisError("history", err)
	}
	resp := historyWire{RoomID: room, Epoch: h.Epoch, Pos: h.Last, Messages: []json.RawMessage{}}
	size := 0
	for _, m := range h.Msgs {
		if m.Deleted {
			resp.Through = m.Pos
			continue
		}
		b, err := json.Marshal(m)
		if err != nil {
			return historyWire{}, err
		}
		if size += len(b) + 1; size > s.cfg.HistoryMaxBytes && len(resp.Messages) > 0 {
			resp.More = true
			s.m.historyCut.Inc()
			break
		}
		resp.Messages = append(resp.Messages, b)
		resp.Through = m.Pos
	}
	return resp, nil
}

// historyQuery reads and checks the query of GET /logic/history; since is
// -1 when absent (the newest messages).
func historyQuery(r *http.Request) (room string, since int64, limit int, err error) {
	q := r.URL.Query()
	room = q.Get("roomId")
	if err := danmaku.CheckID("roomId", room); err != nil {
		return "", 0, 0, err
	}
	since = -1
	if v, ok := q["since"]; ok {
		since, err = strconv.ParseInt(v[0], 10, 64)
		if err != nil || since < 0 {
			return "", 0, 0, danmaku.Errorf(danmaku.EINVALID, "since", "since must be a position, an integer of 0 or more, got %q", v[0])
		}
	}
	limit = historyDefaultLimit
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > historyMaxLimit {
			return "", 0, 0, danmaku.Errorf(danmaku.EINVALID, "limit", "limit must be an integer from 1 to %d, got %q", historyMaxLimit, v[0])
		}
		limit = n
	}
	return room, since, limit, nil
}
