package logic

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A page of an allowed origin may call the API from elsewhere: the
// preflight is answered, the answer carries Access-Control-Allow-Origin
// and exposes Retry-After; another origin is refused with the JSON error.
func TestCORS(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *testEnv) { c.AllowedOrigins = []string{"http://page.example:8080"} })
	do := func(method, origin string, hdr map[string]string, body string) response {
		t.Helper()
		req, _ := http.NewRequest(method, e.url+"/logic/send", strings.NewReader(body))
		req.Header.Set("Origin", origin)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, header: resp.Header, body: b}
	}
	pre := do(http.MethodOptions, "http://page.example:8080", map[string]string{
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}, "")
	if pre.status != http.StatusNoContent || pre.header.Get("Access-Control-Allow-Origin") != "http://page.example:8080" ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(pre.header.Get("Access-Control-Allow-Headers")), "content-type") {
		t.Fatalf("preflight: %d %v", pre.status, pre.header)
	}
	ok := do(http.MethodPost, "http://page.example:8080", map[string]string{"Content-Type": "application/json"},
		`{"roomId":"cors","userId":`+itoa(newUser())+`,"userName":"c","messages":[{"content":"hi"}]}`)
	if ok.status != http.StatusAccepted || ok.header.Get("Access-Control-Allow-Origin") != "http://page.example:8080" ||
		ok.header.Get("Access-Control-Expose-Headers") != "Retry-After" {
		t.Fatalf("cross-origin send: %d %v %s", ok.status, ok.header, ok.body)
	}
	bad := do(http.MethodOptions, "http://evil.example", map[string]string{"Access-Control-Request-Method": "POST"}, "")
	if bad.status != http.StatusForbidden || bad.header.Get("Access-Control-Allow-Origin") != "" ||
		bad.errorBody(t).Code != "permission_denied" || bad.errorBody(t).Field != "origin" {
		t.Fatalf("other origin: %d %v %s", bad.status, bad.header, bad.body)
	}
}

// With the default (empty) list only the API's own host may call it from
// a browser; clients without Origin are unaffected.
func TestCORSDefaultSameHost(t *testing.T) {
	e := newEnv(t)
	host := strings.TrimPrefix(e.url, "http://")
	for origin, want := range map[string]int{"http://" + host: 200, "http://elsewhere.example": 403, "": 200} {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/logic/online?roomId=x", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("origin %q: %d, want %d", origin, resp.StatusCode, want)
		}
	}
}
