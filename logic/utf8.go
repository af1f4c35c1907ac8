package logic

import (
	"encoding/json"
	"unicode/utf8"
)

// encoding/json replaces bytes that are not valid UTF-8 with U+FFFD
// without a word, so a broken client's name or comment would be changed
// silently. The text fields of a send request are decoded through these
// types, which refuse such bytes and name the field.

// badUTF8 is the decoding error of a text field holding invalid UTF-8;
// field is relative to the value being decoded.
type badUTF8 struct{ field string }

func (e *badUTF8) Error() string { return e.field + ": not valid UTF-8" }

// nameText is the userName of a request.
type nameText string

func (t *nameText) UnmarshalJSON(b []byte) error { return decodeText(b, (*string)(t), "userName") }

// contentText is the content of a message.
type contentText string

func (t *contentText) UnmarshalJSON(b []byte) error {
	return decodeText(b, (*string)(t), "content")
}

func decodeText(b []byte, dst *string, field string) error {
	if !utf8.Valid(b) {
		return &badUTF8{field: field}
	}
	return json.Unmarshal(b, dst)
}
