package logic

import (
	"strconv"
	"unicode/utf8"

	"github.com/danmaku/danmaku"
)

// scanSend decodes the common form of a send body without reflection: one
// object of the documented keys in their case, each at most once, strings
// in valid UTF-8 with no escapes or control characters, an integer
// userId, a priority of 0 or 1, and nothing after the object but white
// space. ok is false for any other body, which decodeSend then decodes
// with encoding/json (the way that names a refused field); a body
// scanSend takes decodes there to the same request (FuzzScanSend).
func scanSend(b []byte) (req SendRequest, ok bool) {
	s := sendScan{b: b}
	if !s.next('{') {
		return req, false
	}
	if s.next('}') {
		return req, s.end()
	}
	var seen uint8
	for {
		key, ok := s.str()
		if !ok || !s.next(':') {
			return req, false
		}
		var bit uint8
		switch string(key) {
		case "roomId":
			bit = 1
			req.RoomID, ok = s.text()
		case "userId":
			bit = 2
			req.UserID, ok = s.int()
		case "userName":
			bit = 4
			req.UserName, ok = s.text()
		case "messages":
			bit = 8
			req.Messages, ok = s.messages()
		case "priority":
			bit = 16
			s.space()
			neg := s.i < len(s.b) && s.b[s.i] == '-'
			var p int64
			p, ok = s.int()
			ok = ok && !neg && (p == 0 || p == 1)
			req.Priority = danmaku.Priority(p)
		default:
			return req, false
		}
		if !ok || seen&bit != 0 {
			return req, false
		}
		seen |= bit
		if !s.next(',') {
			return req, s.next('}') && s.end()
		}
	}
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
func (s *sendScan) messages() ([]SendMessage, bool) {
	if !s.next('[') {
		return nil, false
	}
	msgs := make([]SendMessage, 0, 1)
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

func (s *sendScan) message() (m SendMessage, ok bool) {
	if !s.next('{') {
		return m, false
	}
	if s.next('}') {
		return m, true
	}
	var seen uint8
	for {
		key, ok := s.str()
		if !ok || !s.next(':') {
			return m, false
		}
		var bit uint8
		switch string(key) {
		case "content":
			bit = 1
			m.Content, ok = s.text()
		case "msgId":
			bit = 2
			m.MsgID, ok = s.text()
		default:
			return m, false
		}
		if !ok || seen&bit != 0 {
			return m, false
		}
		seen |= bit
		if !s.next(',') {
			return m, s.next('}')
		}
	}
}
