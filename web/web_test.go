package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/", 200, "text/html", `<script src="danmaku.js">`},
		{"GET", "/danmaku.js", 200, "javascript", "DanmakuClient"},
		{"GET", "/demo.css", 200, "text/css", ".bullet"},
		{"GET", "/demo.js", 200, "javascript", "danmakuDemo"},
		{"HEAD", "/", 200, "text/html", ""},
		{"GET", "/nope.js", 404, "", ""},
		{"GET", "/static/", 404, "", ""},
		{"POST", "/", 405, "", ""},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if !strings.Contains(resp.Header.Get("Content-Type"), tc.ctype) {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tc.ctype)
			}
			if !strings.Contains(string(body), tc.body) {
				t.Errorf("body lacks %q", tc.body)
			}
		})
	}
}
