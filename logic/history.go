package logic

import (
	"context"
	"net/http"
	"strconv"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// Limits of GET /logic/history.
const (
	historyDefaultLimit = 50
	historyMaxLimit     = 1000
)

// HistoryResponse is the answer of GET /logic/history: the room's epoch and
// last position, and the messages read, oldest first, each with its pos.
// A room without history has epoch "", pos 0 and no messages. A message a
// moderator deleted keeps its position and is left out, so positions may
// skip; Through is the last position the answer covers, deleted ones
// included (0 when it covers none): the since of the next page.
type HistoryResponse struct {
	RoomID   string            `json:"roomId"`
	Epoch    string            `json:"epoch"`
	Pos      int64             `json:"pos"`
	Through  int64             `json:"through"`
	Messages []danmaku.Message `json:"messages"`
}

// serveHistory is GET /logic/history?roomId=R[&since=P][&limit=N]: with
// since, the oldest messages after position P (from the oldest kept when P
// is older); without, the newest limit messages. One Redis script call.
// Guarded like a send (authorizeRead).
func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	room, since, limit, err := historyQuery(r)
	if err == nil {
		err = s.authorizeRead(r, room)
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RedisTimeout)
	defer cancel()
	h, err := s.store.History(ctx, room, since, limit)
	if err != nil {
		httpx.WriteError(w, s.redisError("history", err))
		return
	}
	resp := HistoryResponse{RoomID: room, Epoch: h.Epoch, Pos: h.Last, Messages: h.Visible()}
	if n := len(h.Msgs); n > 0 {
		resp.Through = h.Msgs[n-1].Pos
	}
	if resp.Messages == nil {
		resp.Messages = []danmaku.Message{}
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
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
