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

// AppendJSON appends r as encoding/json writes it, without reflection,
// when every id goes out as it is (false otherwise: encode r with
// encoding/json).
func (r SendResponse) AppendJSON(dst []byte) ([]byte, bool) {
	dst, ok := appendIDs(append(dst, `{"msgIds":`...), r.MsgIDs)
	if ok && len(r.Held) > 0 {
		dst, ok = appendIDs(append(dst, `,"held":`...), r.Held)
	}
	return append(dst, '}'), ok
}

// AppendJSON appends a as encoding/json writes it, without reflection,
// when its op and every id go out as they are (false otherwise: encode a
// with encoding/json).
func (a AckFrame) AppendJSON(dst []byte) ([]byte, bool) {
	if !plainJSON(a.Op) {
		return dst, false
	}
	dst = append(append(append(dst, `{"op":"`...), a.Op...), `","ref":`...)
	dst = strconv.AppendInt(dst, a.Ref, 10)
	dst, ok := appendIDs(append(dst, `,"ids":`...), a.IDs)
	return append(dst, '}'), ok
}

// appendIDs appends ids as a JSON array of strings (null when nil), when
// each goes out as it is.
func appendIDs(dst []byte, ids []string) ([]byte, bool) {
	if ids == nil {
		return append(dst, "null"...), true
	}
	dst = append(dst, '[')
	for i, id := range ids {
		if !plainJSON(id) {
			return dst, false
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(append(append(dst, '"'), id...), '"')
	}
	return append(dst, ']'), true
}
