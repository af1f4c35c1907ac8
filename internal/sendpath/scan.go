package sendpath

import (
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/danmaku/danmaku"
)

// ScanRequest decodes the common form of a POST /logic/send body without
// reflection: one object of the documented keys in their case, each at
// most once, strings in valid UTF-8 with no escapes or control
// characters, an integer userId, a priority of 0 or 1, and nothing after
// the object but white space. ok is false for any other body, which the
// caller then decodes with encoding/json (the way that names a refused
// field); a body ScanRequest takes decodes there to the same request.
func ScanRequest(b []byte) (req danmaku.SendRequest, ok bool) {
	s := sendScan{b: b}
	ok = s.object(func(key string) bool {
		switch key {
		case "roomId":
			req.RoomID, ok = s.text()
		case "userId":
			req.UserID, ok = s.int()
		case "userName":
			req.UserName, ok = s.text()
		case "messages":
			req.Messages, ok = s.messages()
		case "priority":
			req.Priority, ok = s.priority()
		default:
			return false
		}
		return ok
	}, "roomId", "userId", "userName", "messages", "priority")
	return req, ok && s.end()
}

// ScanSendFrame decodes the common form of a send frame of the WebSocket
// protocol ({"op":"send","room":R,"msgs":[...],"ref":N}) without
// reflection, under the same rules as ScanRequest (keys op, room, msgs,
// priority and ref); ok is false for any other frame, which the caller
// decodes with encoding/json into the same ClientFrame.
func ScanSendFrame(b []byte) (f danmaku.ClientFrame, ok bool) {
	s := sendScan{b: b}
	ok = s.object(func(key string) bool {
		switch key {
		case "op":
			f.Op, ok = s.text()
		case "room":
			f.Room, ok = s.text()
		case "msgs":
			f.Msgs, ok = s.messages()
		case "priority":
			f.Priority, ok = s.priority()
		case "ref":
			f.Ref, ok = s.int()
		default:
			return false
		}
		return ok
	}, "op", "room", "msgs", "priority", "ref")
	return f, ok && f.Op == danmaku.OpSend && s.end()
}

// sendScan reads a send body; every method reports false for what it
// does not take, leaving the body to encoding/json.
type sendScan struct {
	b []byte
	i int
}

func (s *sendScan) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// next consumes c after white space.
func (s *sendScan) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *sendScan) end() bool {
	s.space()
	return s.i == len(s.b)
}

// str returns the bytes of a string without escapes or control
// characters.
func (s *sendScan) str() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// text returns a string value in valid UTF-8.
func (s *sendScan) text() (string, bool) {
	v, ok := s.str()
	if !ok || !utf8.Valid(v) {
		return "", false
	}
	return string(v), true
}

// int returns an integer in JSON's form (no fraction or exponent).
func (s *sendScan) int() (int64, bool) {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || s.b[digits] == '0' && s.i-digits > 1 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	return v, err == nil
}

// messages returns the messages array: objects of content and msgId.
func (s *sendScan) messages() ([]danmaku.SendMessage, bool) {
	if !s.next('[') {
		return nil, false
	}
	msgs := make([]danmaku.SendMessage, 0, 1)
	if s.next(']') {
		return msgs, true
	}
	for {
		m, ok := s.message()
		if !ok {
			return nil, false
		}
		msgs = append(msgs, m)
		if !s.next(',') {
			return msgs, s.next(']')
		}
	}
}

func (s *sendScan) message() (m danmaku.SendMessage, ok bool) {
	ok = s.object(func(key string) bool {
		switch key {
		case "content":
			m.Content, ok = s.text()
		case "msgId":
			m.MsgID, ok = s.text()
		default:
			return false
		}
		return ok
	}, "content", "msgId")
	return m, ok
}

// object reads an object whose keys are among keys, each at most once,
// calling value with the scanner at each value; value reads it and reports
// whether it took it.
func (s *sendScan) object(value func(key string) bool, keys ...string) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	var seen uint8
	for {
		key, ok := s.str()
		if !ok || !s.next(':') {
			return false
		}
		i := slices.Index(keys, string(key))
		if i < 0 || seen&(1<<i) != 0 || !value(keys[i]) {
			return false
		}
		seen |= 1 << i
		if !s.next(',') {
			return s.next('}')
		}
	}
}

// priority returns a priority of 0 or 1.
func (s *sendScan) priority() (danmaku.Priority, bool) {
	s.space()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	p, ok := s.int()
	return danmaku.Priority(p), ok && !neg && (p == 0 || p == 1)
}
