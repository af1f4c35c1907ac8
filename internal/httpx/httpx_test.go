package httpx

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/danmaku/danmaku"
)

func TestWriteError(t *testing.T) {
	cases := []struct {
		err    error
		status int
		want   ErrorDetail
	}{
		{danmaku.Errorf(danmaku.EINVALID, "roomId", "bad"), 400, ErrorDetail{Code: "invalid_argument", Field: "roomId", Message: "bad"}},
		{danmaku.Errorf(danmaku.CodeMethod, "method", "use POST"), 405, ErrorDetail{Code: "method_not_allowed", Field: "method", Message: "use POST"}},
		{danmaku.Unavailable("", errors.New("dial 10.0.0.1:6379")), 503, ErrorDetail{Code: "unavailable", Field: "", Message: "service unavailable"}},
		{errors.New("secret internal detail"), 500, ErrorDetail{Code: "internal", Field: "", Message: "internal error"}},
		{danmaku.Errorf(danmaku.CodeMuted, "userId", "muted"), 403, ErrorDetail{Code: "muted", Field: "userId", Message: "muted"}},
		{danmaku.Errorf("content_blocked", "messages[1].content", "contains a blocked word"), 400,
			ErrorDetail{Code: "content_blocked", Field: "messages[1].content", Message: "contains a blocked word"}},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		WriteError(rec, tc.err)
		var b ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.status || b.Error != tc.want || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%v: %d %+v, want %d %+v", tc.err, rec.Code, b.Error, tc.status, tc.want)
		}
	}
	if Status(danmaku.Errorf(danmaku.CodeForbidden, "origin", "no")) != http.StatusForbidden {
		t.Error("forbidden")
	}
}
