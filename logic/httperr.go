package logic

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/danmaku/danmaku"
)

// HTTP-only error codes, for failures that have no domain meaning but a
// distinct status a client should see.
const (
	codeTooLarge  = "payload_too_large"
	codeMediaType = "unsupported_media_type"
	codeMethod    = "method_not_allowed"
)

// statusOf is the one table from error code to HTTP status.
var statusOf = map[string]int{
	danmaku.EINVALID:     http.StatusBadRequest,
	danmaku.ENOTFOUND:    http.StatusNotFound,
	danmaku.ECONFLICT:    http.StatusConflict,
	danmaku.ERATELIMIT:   http.StatusTooManyRequests,
	danmaku.EUNAVAILABLE: http.StatusServiceUnavailable,
	danmaku.EUNAUTH:      http.StatusUnauthorized,
	danmaku.EINTERNAL:    http.StatusInternalServerError,
	codeTooLarge:         http.StatusRequestEntityTooLarge,
	codeMediaType:        http.StatusUnsupportedMediaType,
	codeMethod:           http.StatusMethodNotAllowed,
}

// StatusOf returns the HTTP status for err's code.
func StatusOf(err error) int {
	if s, ok := statusOf[danmaku.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// writeError answers with err's status and the JSON error body. Only the
// message of a *danmaku.Error is shown, never its cause: causes carry
// internal addresses and library text that clients cannot act on.
func writeError(w http.ResponseWriter, err error) {
	d := errorDetail{Code: danmaku.ErrorCode(err), Message: "internal error"}
	var de *danmaku.Error
	if errors.As(err, &de) {
		d.Field = de.Field
		if de.Code != danmaku.EINTERNAL {
			d.Message = de.Message
		}
	}
	if d.Code == danmaku.EUNAVAILABLE && d.Message == "" {
		d.Message = "service unavailable"
	}
	writeJSON(w, StatusOf(err), errorBody{Error: d})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
