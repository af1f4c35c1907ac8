// Package httpx is the HTTP face of danmaku.Error for every role: the one
// table from error code to status, and the JSON error body
//
//	{"error":{"code":"invalid_argument","field":"messages[0].content","message":"..."}}
package httpx

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/danmaku/danmaku"
)

// statusOf is the one table from error code to HTTP status.
var statusOf = map[string]int{
	danmaku.EINVALID:      http.StatusBadRequest,
	danmaku.ENOTFOUND:     http.StatusNotFound,
	danmaku.ECONFLICT:     http.StatusConflict,
	danmaku.ERATELIMIT:    http.StatusTooManyRequests,
	danmaku.EUNAVAILABLE:  http.StatusServiceUnavailable,
	danmaku.EUNAUTH:       http.StatusUnauthorized,
	danmaku.EINTERNAL:     http.StatusInternalServerError,
	danmaku.CodeTooLarge:  http.StatusRequestEntityTooLarge,
	danmaku.CodeMediaType: http.StatusUnsupportedMediaType,
	danmaku.CodeMethod:    http.StatusMethodNotAllowed,
	danmaku.CodeForbidden: http.StatusForbidden,
	danmaku.CodeMuted:     http.StatusForbidden,
	danmaku.CodeBanned:    http.StatusForbidden,
	danmaku.CodeBlocked:   http.StatusBadRequest, // field names the input

	danmaku.CodePriorityDenied: http.StatusForbidden,
	danmaku.CodeSlowMode:       http.StatusTooManyRequests,
	danmaku.CodeMembers:        http.StatusForbidden,
	danmaku.CodeDuplicate:      http.StatusConflict,
}

// Status returns the HTTP status for err's code.
func Status(err error) int {
	if s, ok := statusOf[danmaku.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// The error body, declared in the root package.
type (
	ErrorBody   = danmaku.ErrorBody
	ErrorDetail = danmaku.ErrorDetail
)

// WriteError answers with err's status and the JSON error body. Only the
// message of a *danmaku.Error is shown, never its cause: causes carry
// internal addresses and library text that clients cannot act on.
func WriteError(w http.ResponseWriter, err error) {
	d := ErrorDetail{Code: danmaku.ErrorCode(err), Message: "internal error"}
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
	WriteJSON(w, Status(err), ErrorBody{Error: d})
}

// appender is a body that encodes itself without reflection when it can
// (danmaku.SendResponse).
type appender interface {
	AppendJSON(dst []byte) ([]byte, bool)
}

// WriteJSON answers with status and v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var b []byte
	var err error
	if a, ok := v.(appender); ok {
		b, ok = a.AppendJSON(make([]byte, 0, 64))
		if !ok {
			b, err = json.Marshal(v)
		}
	} else {
		b, err = json.Marshal(v)
	}
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

// StatusMux is the listener of a role without a public API (job, the
// archive): metrics on /metrics, /healthz answering ok while the process
// serves, /readyz answering ready's error (503 and the reason) or ok, and
// the JSON 404 elsewhere.
func StatusMux(metrics http.Handler, ready func(r *http.Request) error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r); err != nil {
			WriteError(w, err)
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, danmaku.Errorf(danmaku.ENOTFOUND, "path", "no endpoint %s", r.URL.Path))
	})
	return mux
}
