package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler(Config{}))
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/", 200, "text/html", `<script src="danmaku.js">`},
		{"GET", "/", 200, "text/html", `<meta name="danmaku-api" content="">`},
		{"GET", "/danmaku.js", 200, "javascript", "DanmakuClient"},
		{"GET", "/demo.css", 200, "text/css", ".bullet"},
		{"GET", "/demo.js", 200, "javascript", "danmakuDemo"},
		{"HEAD", "/", 200, "text/html", ""},
		{"GET", "/nope.js", 404, "application/json", `"not_found"`},
		{"GET", "/static/", 404, "application/json", `"not_found"`},
		{"POST", "/", 405, "application/json", `"method_not_allowed"`},
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
			if tc.status >= 400 && !json.Valid(body) {
				t.Errorf("error body is not JSON: %s", body)
			}
		})
	}
}

// The page served for an API elsewhere carries its address.
func TestHandlerAPIBase(t *testing.T) {
	srv := httptest.NewServer(Handler(Config{APIBase: "http://logic.example:8090/"}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `<meta name="danmaku-api" content="http://logic.example:8090">`) {
		t.Fatalf("page lacks the API base:\n%s", b)
	}
}

func TestConfigValidate(t *testing.T) {
	for base, ok := range map[string]bool{"": true, "http://localhost:8090": true, "https://api.example/": true,
		"localhost:8090": false, "ftp://x": false, "http://x/logic": false} {
		c := Config{APIBase: base}
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("api_base %q: %v", base, err)
		}
	}
}

// The console is served under /admin/ with the client library, never
// cached nor framed and held to its own scripts; the page server does not
// serve it.
func TestConsole(t *testing.T) {
	srv := httptest.NewServer(Console())
	defer srv.Close()
	page := httptest.NewServer(Handler(Config{}))
	defer page.Close()
	for _, tc := range []struct {
		base, method, path string
		status             int
		ctype, body        string
	}{
		{srv.URL, "GET", "/admin/", 200, "text/html", `<script src="console.js">`},
		{srv.URL, "GET", "/admin/console.js", 200, "javascript", "danmakuConsole"},
		{srv.URL, "GET", "/admin/console.css", 200, "text/css", ".feed"},
		{srv.URL, "GET", "/admin/danmaku.js", 200, "javascript", "DanmakuClient"},
		{srv.URL, "HEAD", "/admin/", 200, "text/html", ""},
		{srv.URL, "GET", "/admin/nope.js", 404, "application/json", `"not_found"`},
		{srv.URL, "GET", "/admin/admin/index.html", 404, "application/json", `"not_found"`},
		{srv.URL, "GET", "/demo.js", 404, "application/json", `"not_found"`},
		{srv.URL, "POST", "/admin/", 405, "application/json", `"method_not_allowed"`},
		{page.URL, "GET", "/admin/index.html", 404, "application/json", `"not_found"`},
		{page.URL, "GET", "/admin/console.js", 404, "application/json", `"not_found"`},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.base+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if !strings.Contains(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(string(body), tc.body) {
				t.Errorf("Content-Type %q, body lacks %q", resp.Header.Get("Content-Type"), tc.body)
			}
			if tc.status == 200 && tc.base == srv.URL {
				h := resp.Header
				if !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || h.Get("X-Frame-Options") != "DENY" ||
					h.Get("Cache-Control") != "no-store" {
					t.Errorf("headers %v", h)
				}
			}
		})
	}
}
