package comet

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// jsonProblem says why a client frame is not the JSON the protocol wants,
// in the protocol's terms (field names, JSON kinds), never in Go's.
func jsonProblem(err error) string {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		kind := "value"
		if typeErr.Type != nil && typeErr.Type.Kind() == reflect.String {
			kind = "string"
		}
		return fmt.Sprintf("%s must be a JSON %s, not %s", typeErr.Field, kind, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at offset %d", syntaxErr.Offset)
	}
	return "malformed JSON"
}

// badRoomText is the message of a bad_room error frame, the same whether
// the room came in the URL or in a join: "room: <what is wrong>".
func badRoomText(err error) string {
	var e *danmaku.Error
	if errors.As(err, &e) {
		return e.Field + ": " + e.Message
	}
	return "room: " + err.Error()
}

// invalidText closes a viewer that sent a text frame which is not UTF-8
// with 1007 (invalid frame payload data), as RFC 6455 requires, and
// reports whether it did.
func (c *conn) invalidText(mt int, data []byte) bool {
	if mt != websocket.TextMessage || utf8.Valid(data) {
		return false
	}
	c.s.metrics.rejected("bad_utf8")
	c.closeAfterQueued(websocket.CloseInvalidFramePayloadData, "text frame is not valid UTF-8")
	return true
}
