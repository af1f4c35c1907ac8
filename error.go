package danmaku

import (
	"errors"
	"fmt"
)

// Error codes. The HTTP layer maps each to one status in one table.
const (
	EINVALID     = "invalid_argument" // bad input; Field names it
	ENOTFOUND    = "not_found"
	ECONFLICT    = "conflict"     // e.g. a lock held by somebody else
	ERATELIMIT   = "rate_limited" // caller must wait
	EUNAVAILABLE = "unavailable"  // a dependency (Kafka, Redis, comet) is down
	EUNAUTH      = "unauthenticated"
	EINTERNAL    = "internal"
)

// More codes of HTTP error bodies and WebSocket error frames: every code a
// client can receive is declared in this file (docs/protocol.md lists
// them). The HTTP layer gives each its status in the same table as the
// codes above.
const (
	// HTTP requests.
	CodeTooLarge  = "payload_too_large"
	CodeMediaType = "unsupported_media_type"
	CodeMethod    = "method_not_allowed"
	CodeForbidden = "permission_denied" // e.g. a browser origin not allowed, a room the token does not allow
	CodeMuted     = "muted"             // the sender is muted (moderation)
	CodeBanned    = "banned"            // the sender is banned from the room; also a viewer's error frame
	CodeBlocked   = "content_blocked"   // a comment with a blocked word (reject mode); Field names it
	// CodePriorityDenied: a send asked for high priority without the right
	// to (a token role moderator or priority, or the admin API).
	CodePriorityDenied = "priority_denied"
	CodeSlowMode       = "slow_mode"         // the room's slow mode: one message per user per RoomState.SlowSeconds
	CodeMembers        = "members_only"      // the room is members-only and the token has no member role
	CodeDuplicate      = "duplicate_content" // unique chat: the same content was sent to the room in the last RoomState.UniqueSeconds

	// WebSocket error frames ({"op":"error","code":...}).
	CodeBadJSON        = "bad_json"       // the frame is not a JSON object
	CodeBadFrame       = "bad_frame"      // a binary frame
	CodeUnknownOp      = "unknown_op"     // op missing or not known
	CodeBadRoom        = "bad_room"       // the room id fails CheckID
	CodeTooManyRooms   = "too_many_rooms" // a sub beyond the connection's room limit
	CodeFrameForbidden = "forbidden"      // the token does not allow the room
	CodeTokenExpired   = "token_expired"  // a join or sub after the connection's token expired
	CodeNotSubscribed  = "not_subscribed" // a density op for a room the connection does not hold
)

// Error is the one error type of the service. Code is machine readable,
// Field names the offending input (dotted path, may be empty), Message is
// for humans.
type Error struct {
	Code    string
	Field   string
	Message string
	Err     error // optional cause
}

func (e *Error) Error() string {
	s := e.Code
	if e.Field != "" {
		s += " " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and field.
func Errorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Unavailable wraps cause as an EUNAVAILABLE error.
func Unavailable(what string, cause error) *Error {
	return &Error{Code: EUNAVAILABLE, Message: what, Err: cause}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorField returns the Field of the first *Error in err's chain.
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
