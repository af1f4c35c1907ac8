package danmaku

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// appendEnvelope appends the JSON encoding/json writes for
// Envelope{V: EnvelopeVersion, Room: room, Msg: m, HoldMs: holdMs}, without
// reflection, when each of its strings is written as its bytes
// (plainJSON); false otherwise, and the caller encodes it with
// encoding/json. The bytes are the same either way (FuzzAppendEnvelope).
func appendEnvelope(dst []byte, room string, m Message, holdMs int64) ([]byte, bool) {
	if !plainJSON(room) || !plainJSON(m.ID) || !plainJSON(m.Name) || !plainJSON(m.Content) {
		return dst, false
	}
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, EnvelopeVersion, 10)
	dst = append(append(append(dst, `,"room":"`...), room...), `","msg":{"id":"`...)
	dst = append(append(dst, m.ID...), `","uid":`...)
	dst = strconv.AppendInt(dst, m.UID, 10)
	dst = append(append(append(dst, `,"name":"`...), m.Name...), `","content":"`...)
	dst = append(append(dst, m.Content...), `","ts":`...)
	dst = strconv.AppendInt(dst, m.TS, 10)
	if m.Priority != 0 {
		dst = strconv.AppendUint(append(dst, `,"priority":`...), uint64(m.Priority), 10)
	}
	if m.Mod {
		dst = append(dst, `,"mod":true`...)
	}
	if m.Pos != 0 {
		dst = strconv.AppendInt(append(dst, `,"pos":`...), m.Pos, 10)
	}
	if m.Deleted {
		dst = append(dst, `,"deleted":true`...)
	}
	dst = append(dst, '}')
	if holdMs != 0 {
		dst = strconv.AppendInt(append(dst, `,"holdMs":`...), holdMs, 10)
	}
	return append(dst, '}'), true
}

// plainJSON reports whether encoding/json writes s between its quotes as
// it is: valid UTF-8 without control characters, quotes, backslashes, the
// characters it escapes for HTML (<, >, &) or U+2028 and U+2029.
func plainJSON(s string) bool {
	wide := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			return false
		case c >= utf8.RuneSelf:
			wide = true
		}
	}
	return !wide || utf8.ValidString(s) && !strings.ContainsRune(s, '\u2028') && !strings.ContainsRune(s, '\u2029')
}

// marshalEnvelope is appendEnvelope, or encoding/json for what it leaves.
func marshalEnvelope(room string, m Message, holdMs int64) ([]byte, error) {
	n := 96 + len(room) + len(m.ID) + len(m.Name) + len(m.Content)
	if b, ok := appendEnvelope(make([]byte, 0, n), room, m, holdMs); ok {
		return b, nil
	}
	return json.Marshal(Envelope{V: EnvelopeVersion, Room: room, Msg: m, HoldMs: holdMs})
}
