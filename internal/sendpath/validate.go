package sendpath

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/unitext"
)

// Limits are the validation bounds of a send.
type Limits struct {
	MaxMessages int // messages per request
	MaxContent  int // code points per comment
	MaxName     int // code points per user name
	MaxHigh     int // high-priority messages per request: the room bucket's burst
}

// Validate checks req and returns the message ids to use, in order:
// namespaced client ids where given, "" where the server must assign one.
func (l Limits) Validate(req *danmaku.SendRequest) ([]string, error) {
	if err := danmaku.CheckID("roomId", req.RoomID); err != nil {
		return nil, err
	}
	if err := CheckUserID("userId", req.UserID); err != nil {
		return nil, err
	}
	if err := CheckName("userName", req.UserName, l.MaxName); err != nil {
		return nil, err
	}
	if err := l.CheckCount(len(req.Messages)); err != nil {
		return nil, err
	}
	if err := req.Priority.Check("priority"); err != nil {
		return nil, err
	}
	if req.Priority.High() && len(req.Messages) > l.MaxHigh {
		return nil, danmaku.Errorf(danmaku.EINVALID, "messages", "at most %d high-priority messages per request (logic.high_rate_burst), got %d", l.MaxHigh, len(req.Messages))
	}
	ids := make([]string, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		if err := CheckText(fmt.Sprintf("messages[%d].content", i), m.Content, l.MaxContent, true); err != nil {
			return nil, err
		}
		if m.MsgID == "" {
			continue
		}
		field := fmt.Sprintf("messages[%d].msgId", i)
		id, err := ClientMsgID(field, req.UserID, m.MsgID)
		if err != nil {
			return nil, err
		}
		if ids[i], err = Once(ids[:i], id, field); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// MaxUserID is the largest user id: 2^53-1, the largest integer a
// JavaScript number holds exactly, so every client reads ids as sent.
const MaxUserID = 1<<53 - 1

// CheckUserID requires 1..MaxUserID.
func CheckUserID(field string, uid int64) error {
	if uid <= 0 || uid > MaxUserID {
		return danmaku.Errorf(danmaku.EINVALID, field, "must be an integer from 1 to %d (2^53-1, the largest JavaScript holds exactly)", int64(MaxUserID))
	}
	return nil
}

// CheckCount requires 1 to maxMessages messages in a request.
func (l Limits) CheckCount(n int) error {
	switch {
	case n == 0:
		return danmaku.Errorf(danmaku.EINVALID, "messages", "must hold at least one message")
	case n > l.MaxMessages:
		return danmaku.Errorf(danmaku.EINVALID, "messages", "at most %d messages per request, got %d", l.MaxMessages, n)
	}
	return nil
}

// Once returns id unless an earlier message of the request (ids) has it,
// which is an error naming field.
func Once(earlier []string, id, field string) (string, error) {
	for j, e := range earlier {
		if e == id {
			return "", danmaku.Errorf(danmaku.EINVALID, field, "same msgId as messages[%d]", j)
		}
	}
	return id, nil
}

// CheckText requires 1..max code points, something visible (not only
// white space, invisible characters or lone combining marks:
// unitext.Blank), and no control characters (a comment may hold line
// breaks and tabs).
func CheckText(field, s string, maxRunes int, multiline bool) error {
	if unitext.Blank(s) {
		return danmaku.Errorf(danmaku.EINVALID, field, "must not be empty or only invisible characters")
	}
	if n := utf8.RuneCountInString(s); n > maxRunes {
		return danmaku.Errorf(danmaku.EINVALID, field, "longer than %d characters (%d)", maxRunes, n)
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t')) {
			return danmaku.Errorf(danmaku.EINVALID, field, "control character %U not allowed", r)
		}
	}
	return nil
}

// CheckName checks a display name as CheckText does, and refuses
// bidirectional controls: in a name they reorder what the page shows after
// it ("\u202Enimda" shows as "admin").
func CheckName(field, s string, maxRunes int) error {
	if err := CheckText(field, s, maxRunes, false); err != nil {
		return err
	}
	if r, ok := unitext.BidiControl(s); ok {
		return danmaku.Errorf(danmaku.EINVALID, field, "bidirectional control %U not allowed in a name", r)
	}
	return nil
}
