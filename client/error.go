package client

import (
	"errors"
	"fmt"
	"time"
)

// Error is an answer of the service that refused a call: the HTTP status
// (0 for an error frame of a WebSocket), the code of the service's error
// table (danmaku.EINVALID, danmaku.CodeMuted, ...), the input it is about
// and the service's message. RetryAfter is set on rate_limited answers.
type Error struct {
	Status     int
	Code       string
	Field      string
	Message    string
	RetryAfter time.Duration
	// Room names the room of a refused join or sub (error frames).
	Room string
}

func (e *Error) Error() string {
	s := e.Code
	if e.Status != 0 {
		s = fmt.Sprintf("%d %s", e.Status, e.Code)
	}
	if e.Room != "" {
		s += " room " + e.Room
	}
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Code returns the service's code of err when it is (or wraps) an *Error,
// else "".
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
