package logic

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/wordfilter"
	"github.com/danmaku/danmaku/route"
)

// Edited blocked words (route.AddWords): a global list (admin secret) and
// one per room (the secret, or a moderator token of the room), each word
// with its mode: reject refuses a comment or name containing it (400
// content_blocked) for everybody; review puts a non-moderator's comment in
// the room's review queue (review.go). They add to the configured list
// (logic.blocked_words) and hold on every logic and comet within a second
// (sendpath/words.go). Edits are audited.
//
//	GET  /logic/admin/words[?roomId=R]   {"roomId"?,"words":[{"word","mode"}]}
//	POST /logic/admin/words/add          {"roomId"?,"words":[...],"mode"?}  {"action":"words_add","mode","words":N}
//	POST /logic/admin/words/remove       {"roomId"?,"words":[...]}          {"action":"words_remove","words":N}

// MaxEditedWords is the most words an edited list holds; maxWordsEdit the
// most one request adds or removes.
const (
	MaxEditedWords = 1000
	maxWordsEdit   = 100
)

// checkWords checks and trims the words of an edit; add also checks the
// mode (reject when empty).
func checkWords(req *AdminRequest, add bool) error {
	if len(req.Words) == 0 || len(req.Words) > maxWordsEdit {
		return danmaku.Errorf(danmaku.EINVALID, "words", "want 1 to %d words", maxWordsEdit)
	}
	for i, w := range req.Words {
		if msg := wordfilter.CheckWord(w); msg != "" {
			return danmaku.Errorf(danmaku.EINVALID, "words["+strconv.Itoa(i)+"]", "%s", msg)
		}
		req.Words[i] = strings.TrimSpace(w)
	}
	switch {
	case !add && req.Mode != "":
		return danmaku.Errorf(danmaku.EINVALID, "mode", "a removal takes no mode")
	case !add:
	case req.Mode == "":
		req.Mode = route.WordReject
	case req.Mode != route.WordReject && req.Mode != route.WordReview:
		return danmaku.Errorf(danmaku.EINVALID, "mode", "want %q or %q", route.WordReject, route.WordReview)
	}
	return nil
}

// adminAddWords adds words to the room's list, or the global one.
func (s *Server) adminAddWords(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := checkWords(req, true); err != nil {
		return AdminResponse{}, err
	}
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	n, ok, err := s.store.AddWords(ctx, req.RoomID, req.Mode, req.Words, MaxEditedWords)
	if err != nil {
		return AdminResponse{}, s.redisError("add words", err)
	}
	if !ok {
		return AdminResponse{}, danmaku.Errorf(danmaku.EINVALID, "words", "the list holds at most %d words", MaxEditedWords)
	}
	s.wordsChanged(r, req.RoomID)
	return AdminResponse{RoomID: req.RoomID, Mode: req.Mode, Words: &n}, nil
}

// adminRemoveWords takes words out of the room's list, or the global one;
// words counts the ones that were there.
func (s *Server) adminRemoveWords(r *http.Request, req *AdminRequest) (AdminResponse, error) {
	if err := checkWords(req, false); err != nil {
		return AdminResponse{}, err
	}
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	n, err := s.store.RemoveWords(ctx, req.RoomID, req.Words)
	if err != nil {
		return AdminResponse{}, s.redisError("remove words", err)
	}
	s.wordsChanged(r, req.RoomID)
	return AdminResponse{RoomID: req.RoomID, Words: &n}, nil
}

// wordsChanged makes this logic's sends apply an edit at once.
func (s *Server) wordsChanged(r *http.Request, room string) {
	if room == "" {
		s.send.RefreshWords()
		return
	}
	ctx, cancel := s.redisCtx(r)
	defer cancel()
	s.send.RefreshRoom(ctx, room, time.Now())
}

// serveWords is GET /logic/admin/words[?roomId=R]: the room's edited
// words, or the global ones (admin secret).
func (s *Server) serveWords(w http.ResponseWriter, r *http.Request) {
	room, _, ok := s.adminRead(w, r, readQuery{Name: "words", Action: "words_add"})
	if !ok {
		return
	}
	var words map[string]string
	ctx, cancel := s.redisCtx(r)
	var err error
	if room == "" {
		var l route.WordList
		l, _, err = s.store.GlobalWords(ctx, -1)
		words = l.Words
	} else {
		var rd route.Room
		rd, err = s.store.ReadRoom(ctx, room)
		words = rd.Words
	}
	cancel()
	if err != nil {
		httpx.WriteError(w, s.redisError("words", err))
		return
	}
	out := danmaku.WordsResponse{RoomID: room, Words: []danmaku.WordEntry{}}
	for word, mode := range words {
		out.Words = append(out.Words, danmaku.WordEntry{Word: word, Mode: mode})
	}
	slices.SortFunc(out.Words, func(a, b danmaku.WordEntry) int { return strings.Compare(a.Word, b.Word) })
	httpx.WriteJSON(w, http.StatusOK, out)
}
