package route

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/danmaku/danmaku"
)

var wordsScript = script("words")

// Edited blocked-word lists: besides the configured list (a file, reloaded
// on SIGHUP), the admin API keeps one global list (admin:words) and one
// per room (in room:state:{room}, read with the room's settings), each
// word with its mode, WordReject or WordReview. Every edit changes the
// list's version, so a reader polls the global list with one small call
// (GlobalWords) and reads it whole only after a change.

// Modes of an edited word.
const (
	WordReject = "reject" // the comment is refused (400 content_blocked)
	WordReview = "review" // the comment waits in the room's review queue
)

// wordField prefixes the fields of a word list's hash that hold a word,
// valued its mode.
const wordField = "word."

// WordList is an edited list: its words with their modes, and its
// version (0: never edited).
type WordList struct {
	Ver   int64
	Words map[string]string
}

// wordsKey is the hash of room's list, or of the global list for "".
func wordsKey(room string) string {
	if room == "" {
		return globalWordsKey
	}
	return roomStateKey(room)
}

// AddWords adds words to room's list (the global one for "") with mode,
// or gives them mode where listed, and returns the list's size after. It
// reports false, adding none, when the list would hold more than max.
func (s *Store) AddWords(ctx context.Context, room, mode string, words []string, max int) (int, bool, error) {
	if room != "" {
		if err := danmaku.CheckID("room", room); err != nil {
			return 0, false, err
		}
	}
	args := []any{"add", mode, max}
	for _, w := range words {
		args = append(args, w)
	}
	n, err := wordsScript.Run(ctx, s.rdb, []string{wordsKey(room)}, args...).Int()
	if err != nil {
		return 0, false, wrap("add words", err)
	}
	return n, n >= 0, nil
}

// RemoveWords takes words out of room's list (the global one for "") and
// returns how many were there.
func (s *Store) RemoveWords(ctx context.Context, room string, words []string) (int, error) {
	if room != "" {
		if err := danmaku.CheckID("room", room); err != nil {
			return 0, err
		}
	}
	args := []any{"remove"}
	for _, w := range words {
		args = append(args, w)
	}
	n, err := wordsScript.Run(ctx, s.rdb, []string{wordsKey(room)}, args...).Int()
	return n, wrap("remove words", err)
}

// GlobalWords reads the global list when its version is not known (the
// version the caller has); changed is false, and the list empty, when it
// is.
func (s *Store) GlobalWords(ctx context.Context, known int64) (l WordList, changed bool, err error) {
	res, err := wordsScript.Run(ctx, s.rdb, []string{globalWordsKey}, "read", known).Slice()
	if err != nil || len(res) == 0 {
		return l, false, wrap("global words", err)
	}
	v, _ := res[0].(string)
	l.Ver, _ = strconv.ParseInt(v, 10, 64)
	if len(res) < 2 {
		return l, false, nil
	}
	flat, _ := res[1].([]any)
	h := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		h[k], _ = flat[i+1].(string)
	}
	l.Words = wordsOf(h)
	return l, true, nil
}

// wordsOf returns the words of a list's hash with their modes; nil when
// none.
func wordsOf(h map[string]string) map[string]string {
	var out map[string]string
	for f, mode := range h {
		if w, ok := strings.CutPrefix(f, wordField); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[w] = mode
		}
	}
	return out
}

// WordsSum is a digest of words that changes when a word or a mode does,
// "" for none: a reader that compiles a list compiles it again only when
// the sum changed.
func WordsSum(words map[string]string) string {
	if len(words) == 0 {
		return ""
	}
	keys := make([]string, 0, len(words))
	for w := range words {
		keys = append(keys, w)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, w := range keys {
		h.Write([]byte(w))
		h.Write([]byte{0})
		h.Write([]byte(words[w]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
