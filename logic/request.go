package logic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/unitext"
)

// The bodies of the send route, declared with every body of the API in
// the root package.
type (
	SendRequest  = danmaku.SendRequest
	SendMessage  = danmaku.SendMessage
	SendResponse = danmaku.SendResponse
)

// sendWire is SendRequest as first decoded: messages stay raw so each is
// decoded on its own and an error can name its index
// ("messages[3].content"), which encoding/json's errors do not.
type sendWire struct {
	RoomID   string            `json:"roomId"`
	UserID   int64             `json:"userId"`
	UserName nameText          `json:"userName"`
	Messages []json.RawMessage `json:"messages"`
	Priority danmaku.Priority  `json:"priority"`
}

// messageWire is SendMessage as decoded, with content checked for UTF-8.
type messageWire struct {
	Content contentText `json:"content"`
	MsgID   string      `json:"msgId,omitempty"`
}

// sendFast is SendRequest as decoded in one pass: the messages decoded in
// place. A body it refuses is decoded again through sendWire, whose errors
// name the field.
type sendFast struct {
	RoomID   string           `json:"roomId"`
	UserID   int64            `json:"userId"`
	UserName nameText         `json:"userName"`
	Messages []messageWire    `json:"messages"`
	Priority danmaku.Priority `json:"priority"`
}

// bodies holds the buffers request bodies are read into.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decodeSend reads and decodes the body of r. Unknown fields are rejected
// so a misspelt key cannot silently drop the client's idempotency key, and
// so are keys in another case or given twice (checkSendKeys). A good
// body is decoded once; a bad one is decoded again, over the same bytes
// and read error, the way that names the field.
func decodeSend(w http.ResponseWriter, r *http.Request, limit int64) (SendRequest, error) {
	if err := checkJSONType(r.Header.Get("Content-Type")); err != nil {
		return SendRequest{}, err
	}
	buf := bodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer bodies.Put(buf)
	_, rerr := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if rerr == nil {
		var f sendFast
		if decodeOne(bytes.NewReader(buf.Bytes()), &f) == nil {
			req := SendRequest{RoomID: f.RoomID, UserID: f.UserID, UserName: string(f.UserName), Priority: f.Priority}
			if f.Messages != nil {
				req.Messages = make([]SendMessage, len(f.Messages))
				for i, m := range f.Messages {
					req.Messages[i] = SendMessage{Content: string(m.Content), MsgID: m.MsgID}
				}
			}
			return req, checkSendKeys(buf.Bytes())
		}
	}
	body := io.Reader(bytes.NewReader(buf.Bytes()))
	if rerr != nil {
		body = io.MultiReader(body, errReader{rerr})
	}
	req, err := decodeSendWire(body, limit)
	if err == nil {
		err = checkSendKeys(buf.Bytes())
	}
	return req, err
}

// errReader returns err, as the body's reader did after its bytes.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// decodeSendWire decodes a send body through sendWire, each message on its
// own, so an error names the message ("messages[3].content").
func decodeSendWire(body io.Reader, limit int64) (SendRequest, error) {
	var req SendRequest
	var wire sendWire
	if err := decodeOne(body, &wire); err != nil {
		return req, decodeError(err, "", limit)
	}
	req = SendRequest{RoomID: wire.RoomID, UserID: wire.UserID, UserName: string(wire.UserName), Priority: wire.Priority}
	if wire.Messages != nil {
		req.Messages = make([]SendMessage, len(wire.Messages))
	}
	for i, raw := range wire.Messages {
		var m messageWire
		if err := decodeItem(raw, i, limit, &m); err != nil {
			return req, err
		}
		req.Messages[i] = SendMessage{Content: string(m.Content), MsgID: m.MsgID}
	}
	return req, nil
}

// decodeBody decodes the JSON body of r, of at most limit bytes and sent
// as application/json, into v: exactly one JSON object, unknown fields
// refused.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if err := checkJSONType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	if err := decodeOne(http.MaxBytesReader(w, r.Body, limit), v); err != nil {
		return decodeError(err, "", limit)
	}
	return nil
}

// errTrailing is decodeOne's refusal of data after the JSON value.
var errTrailing = errors.New("unexpected data after the JSON object")

// decodeOne decodes exactly one JSON value from body into v, unknown fields
// refused: trailing garbage means a broken client.
func decodeOne(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return errTrailing
	}
	return nil
}

// decodeItem decodes messages[i] of a request into v, unknown fields
// refused, so an error names the message ("messages[3].content").
func decodeItem(raw json.RawMessage, i int, limit int64, v any) error {
	md := json.NewDecoder(bytes.NewReader(raw))
	md.DisallowUnknownFields()
	if err := md.Decode(v); err != nil {
		return decodeError(err, fmt.Sprintf("messages[%d]", i), limit)
	}
	return nil
}

func checkJSONType(ct string) error {
	if ct == "" {
		return danmaku.Errorf(danmaku.CodeMediaType, "Content-Type", "missing; use application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return danmaku.Errorf(danmaku.CodeMediaType, "Content-Type", "%q is not application/json", ct)
	}
	return nil
}

// decodeError turns a decoding failure into an EINVALID (or 413) error
// naming the field; prefix is the path of the value being decoded ("" for
// the body, "messages[2]" for one message).
func decodeError(err error, prefix string, limit int64) error {
	var (
		maxErr    *http.MaxBytesError
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		utf8Err   *badUTF8
	)
	field := func(name string) string {
		switch {
		case prefix == "" && name == "":
			return "body"
		case prefix == "":
			return name
		case name == "":
			return prefix
		}
		return prefix + "." + name
	}
	switch {
	case errors.Is(err, errTrailing):
		return danmaku.Errorf(danmaku.EINVALID, "body", "unexpected data after the JSON object")
	case errors.As(err, &utf8Err):
		return danmaku.Errorf(danmaku.EINVALID, field(utf8Err.field), "not valid UTF-8")
	case errors.As(err, &maxErr):
		return danmaku.Errorf(danmaku.CodeTooLarge, "body", "larger than %d bytes", limit)
	case errors.As(err, &syntaxErr):
		return danmaku.Errorf(danmaku.EINVALID, "body", "malformed JSON at offset %d", syntaxErr.Offset)
	case errors.As(err, &typeErr):
		return danmaku.Errorf(danmaku.EINVALID, field(typeErr.Field), "must be a JSON %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.Is(err, io.EOF):
		return danmaku.Errorf(danmaku.EINVALID, "body", "empty body")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return danmaku.Errorf(danmaku.EINVALID, "body", "truncated JSON")
	}
	// encoding/json reports unknown fields only as text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return danmaku.Errorf(danmaku.EINVALID, field(strings.Trim(name, `"`)), "unknown field")
	}
	return danmaku.Errorf(danmaku.EINVALID, field(""), "invalid JSON: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int64", "int", "float64", "uint8":
		return "integer"
	case "slice":
		return "array"
	case "struct":
		return "object"
	}
	return goKind
}

// limits are the validation bounds taken from Config.
type limits struct {
	maxMessages, maxContent, maxName int
	maxHigh                          int // high-priority messages per request: the room bucket's burst
}

// validate checks req and returns the message ids to use, in order:
// namespaced client ids where given, "" where the server must assign one.
func (l limits) validate(req *SendRequest) ([]string, error) {
	if err := danmaku.CheckID("roomId", req.RoomID); err != nil {
		return nil, err
	}
	if err := checkUserID("userId", req.UserID); err != nil {
		return nil, err
	}
	if err := checkName("userName", req.UserName, l.maxName); err != nil {
		return nil, err
	}
	if err := l.checkCount(len(req.Messages)); err != nil {
		return nil, err
	}
	if err := req.Priority.Check("priority"); err != nil {
		return nil, err
	}
	if req.Priority.High() && len(req.Messages) > l.maxHigh {
		return nil, danmaku.Errorf(danmaku.EINVALID, "messages", "at most %d high-priority messages per request (logic.high_rate_burst), got %d", l.maxHigh, len(req.Messages))
	}
	ids := make([]string, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		if err := checkText(fmt.Sprintf("messages[%d].content", i), m.Content, l.maxContent, true); err != nil {
			return nil, err
		}
		if m.MsgID == "" {
			continue
		}
		field := fmt.Sprintf("messages[%d].msgId", i)
		id, err := clientMsgID(field, req.UserID, m.MsgID)
		if err != nil {
			return nil, err
		}
		if ids[i], err = once(ids[:i], id, field); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// MaxUserID is the largest user id: 2^53-1, the largest integer a
// JavaScript number holds exactly, so every client reads ids as sent.
const MaxUserID = 1<<53 - 1

// checkUserID requires 1..MaxUserID.
func checkUserID(field string, uid int64) error {
	if uid <= 0 || uid > MaxUserID {
		return danmaku.Errorf(danmaku.EINVALID, field, "must be an integer from 1 to %d (2^53-1, the largest JavaScript holds exactly)", int64(MaxUserID))
	}
	return nil
}

// checkCount requires 1 to maxMessages messages in a request.
func (l limits) checkCount(n int) error {
	switch {
	case n == 0:
		return danmaku.Errorf(danmaku.EINVALID, "messages", "must hold at least one message")
	case n > l.maxMessages:
		return danmaku.Errorf(danmaku.EINVALID, "messages", "at most %d messages per request, got %d", l.maxMessages, n)
	}
	return nil
}

// once returns id unless an earlier message of the request (ids) has it,
// which is an error naming field.
func once(earlier []string, id, field string) (string, error) {
	for j, e := range earlier {
		if e == id {
			return "", danmaku.Errorf(danmaku.EINVALID, field, "same msgId as messages[%d]", j)
		}
	}
	return id, nil
}

// checkText requires 1..max code points, something visible (not only
// white space, invisible characters or lone combining marks:
// unitext.Blank), and no control characters (a comment may hold line
// breaks and tabs).
func checkText(field, s string, maxRunes int, multiline bool) error {
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

// checkName checks a display name as checkText does, and refuses
// bidirectional controls: in a name they reorder what the page shows after
// it ("\u202Enimda" shows as "admin").
func checkName(field, s string, maxRunes int) error {
	if err := checkText(field, s, maxRunes, false); err != nil {
		return err
	}
	if r, ok := unitext.BidiControl(s); ok {
		return danmaku.Errorf(danmaku.EINVALID, field, "bidirectional control %U not allowed in a name", r)
	}
	return nil
}
