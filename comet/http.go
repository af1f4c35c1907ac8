package comet

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/danmaku/danmaku"
)

// Codes of HTTP errors that have no domain code.
const (
	codeForbidden        = "permission_denied"  // origin not allowed
	codeMethodNotAllowed = "method_not_allowed" // wrong HTTP method
)

// httpStatus is the one table mapping error codes to HTTP status.
var httpStatus = map[string]int{
	danmaku.EINVALID:     http.StatusBadRequest,
	danmaku.ENOTFOUND:    http.StatusNotFound,
	danmaku.ECONFLICT:    http.StatusConflict,
	danmaku.ERATELIMIT:   http.StatusTooManyRequests,
	danmaku.EUNAVAILABLE: http.StatusServiceUnavailable,
	danmaku.EUNAUTH:      http.StatusUnauthorized,
	danmaku.EINTERNAL:    http.StatusInternalServerError,
	codeForbidden:        http.StatusForbidden,
	codeMethodNotAllowed: http.StatusMethodNotAllowed,
}

// codeOfStatus is the inverse of httpStatus, used by Pusher to rebuild the
// error a comet answered with.
var codeOfStatus = func() map[int]string {
	m := make(map[int]string, len(httpStatus))
	for code, st := range httpStatus {
		m[st] = code
	}
	return m
}()

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// writeError answers with err's status and the JSON error body.
func writeError(w http.ResponseWriter, err error) {
	code := danmaku.ErrorCode(err)
	st, ok := httpStatus[code]
	if !ok {
		st = http.StatusInternalServerError
	}
	msg := err.Error()
	var de *danmaku.Error
	if errors.As(err, &de) {
		msg = de.Message
	}
	writeJSON(w, st, errorBody{errorDetail{Code: code, Field: danmaku.ErrorField(err), Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func healthz(closing func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if closing() {
			writeError(w, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "shutting down"))
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}
