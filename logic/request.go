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

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/sendpath"
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
// so are keys in another case or given twice (checkSendKeys). A body of
// the common form is scanned without reflection (sendpath.ScanRequest); another good
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
		if req, ok := sendpath.ScanRequest(buf.Bytes()); ok {
			return req, nil
		}
		if req, ok := decodeSendFast(buf.Bytes()); ok {
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

// decodeSendFast decodes b through sendFast; false when encoding/json
// refuses it (decodeSend then decodes it again the way that names the
// field).
func decodeSendFast(b []byte) (SendRequest, bool) {
	var f sendFast
	if decodeOne(bytes.NewReader(b), &f) != nil {
		return SendRequest{}, false
	}
	req := SendRequest{RoomID: f.RoomID, UserID: f.UserID, UserName: string(f.UserName), Priority: f.Priority}
	if f.Messages != nil {
		req.Messages = make([]SendMessage, len(f.Messages))
		for i, m := range f.Messages {
			req.Messages[i] = SendMessage{Content: string(m.Content), MsgID: m.MsgID}
		}
	}
	return req, true
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
