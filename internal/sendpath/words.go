package sendpath

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/wordfilter"
	"github.com/danmaku/danmaku/route"
)

// Edited blocked words (route.AddWords): the global list and the room's,
// each word with its mode. A word of mode reject refuses a comment
// containing it (or a name) for everybody, as the configured list in
// reject mode does; a word of mode review puts a non-moderator's comment
// in the room's review queue (Checked.Review), whatever the room's review
// setting. A Path reads the global list at most once per stateFresh (a
// version check; the words only after a change) and a room's list with
// the room's settings, so an edit made anywhere holds on every Path
// within stateFresh plus one Redis read. Each list is compiled once per
// change.

// wordLists are a list compiled: its reject and its review words (nil
// when it has none), and the digest of what it was compiled from.
type wordLists struct {
	sum            string
	reject, review *wordfilter.Filter
}

// edited is a Path's view of the edited lists.
type edited struct {
	mu       sync.Mutex
	global   wordLists
	ver      int64
	at       time.Time // when the global list was last checked
	checking bool
	rooms    map[string]wordLists
}

func newEdited() *edited { return &edited{rooms: map[string]wordLists{}} }

// compileWords compiles words (word -> mode).
func compileWords(sum string, words map[string]string) wordLists {
	var reject, review []string
	for w, mode := range words {
		if mode == route.WordReview {
			review = append(review, w)
		} else {
			reject = append(reject, w)
		}
	}
	l := wordLists{sum: sum}
	if len(reject) > 0 {
		l.reject, _ = wordfilter.New(wordfilter.Config{Mode: wordfilter.ModeReject, Words: reject})
	}
	if len(review) > 0 {
		l.review, _ = wordfilter.New(wordfilter.Config{Mode: wordfilter.ModeReject, Words: review})
	}
	return l
}

// globalWords returns the global list, checked again when older than
// stateFresh (one caller checks; the others use what the Path has). A
// check that fails keeps the list in use until the next.
func (p *Path) globalWords(ctx context.Context) wordLists {
	e := p.edited
	now := time.Now()
	e.mu.Lock()
	if e.checking || now.Sub(e.at) < stateFresh {
		defer e.mu.Unlock()
		return e.global
	}
	e.checking = true
	known := e.ver
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	l, changed, err := p.store.GlobalWords(ctx, known)
	cancel()
	var c wordLists
	if changed {
		c = compileWords("", l.Words)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checking, e.at = false, now
	if err != nil {
		p.log.Warn("read the global blocked words; the list in use stays", zap.Error(err))
	} else if changed {
		e.global, e.ver = c, l.Ver
	}
	return e.global
}

// roomWords returns room's list, compiled again when it changed.
func (p *Path) roomWords(room string, r route.Room) wordLists {
	if r.WordsSum == "" {
		return wordLists{}
	}
	e := p.edited
	e.mu.Lock()
	l, ok := e.rooms[room]
	e.mu.Unlock()
	if ok && l.sum == r.WordsSum {
		return l
	}
	l = compileWords(r.WordsSum, r.Words)
	e.mu.Lock()
	if len(e.rooms) >= maxStates {
		clear(e.rooms) // compiled again on their next sends
	}
	e.rooms[room] = l
	e.mu.Unlock()
	return l
}

// checkEdited applies the edited lists to req in room r: a reject word
// in the name or a message refuses the send; a review word in a message
// of a non-moderator marks it for the review queue in review (one entry
// per message, allocated when needed), which it returns.
func (p *Path) checkEdited(ctx context.Context, req *danmaku.SendRequest, r route.Room, mod bool, review []string) ([]string, error) {
	g, rl := p.globalWords(ctx), p.roomWords(req.RoomID, r)
	if g.reject == nil && g.review == nil && rl.reject == nil && rl.review == nil {
		return review, nil
	}
	if matchAny(req.UserName, g.reject, rl.reject) != "" {
		p.m.Refused("blocked")
		return review, danmaku.Errorf(danmaku.CodeBlocked, "userName", "contains a blocked word")
	}
	for i, m := range req.Messages {
		if matchAny(m.Content, g.reject, rl.reject) != "" {
			p.m.Refused("blocked")
			return review, danmaku.Errorf(danmaku.CodeBlocked, fmt.Sprintf("messages[%d].content", i), "contains a blocked word")
		}
		if mod || i < len(review) && review[i] != "" {
			continue
		}
		if w := matchAny(m.Content, g.review, rl.review); w != "" {
			if review == nil {
				review = make([]string, len(req.Messages))
			}
			review[i] = w
		}
	}
	return review, nil
}

// matchAny returns the first word of the filters found in s, "" for none.
func matchAny(s string, filters ...*wordfilter.Filter) string {
	for _, f := range filters {
		if w, ok := f.Match(s); ok {
			return w
		}
	}
	return ""
}

// RefreshWords makes the next send check the global list again, after a
// change made through this Path's role.
func (p *Path) RefreshWords() {
	p.edited.mu.Lock()
	p.edited.at = time.Time{}
	p.edited.mu.Unlock()
}
