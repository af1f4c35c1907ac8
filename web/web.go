// Package web holds the browser side of the service: danmaku.js, a plain
// JavaScript client library (no build step), and a demo page that uses it.
// Both are embedded in the binary; Handler serves them.
//
// Routes:
//
//	/             the demo page (index.html)
//	/danmaku.js   the client library
//	/demo.css, /demo.js   the page's style and script
//	/vod.html, /vod.js, /vod.css   the replay page: a past stream's comments over a fake video
//
// Console serves the moderator console (static/admin) at /admin/, where
// logic's admin API is: cmd/logic and the all-in-one binary mount it there.
//
// The page opens its WebSocket on its own origin (/ws) and calls the API
// (/logic/*) and links /metrics at Config.APIBase, its own origin when
// empty. So the all-in-one binary serves it as is, and the comet binary
// serves it with the address of logic, whose logic.allowed_origins must
// then list the comet's origin.
package web

import (
	"bytes"
	"embed"
	"html"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/httpx"
)

//go:embed static
var static embed.FS

// Config is the "page" section of a binary that serves the demo page for
// an API on another origin.
type Config struct {
	// APIBase is the base URL of logic's HTTP API, e.g.
	// "http://localhost:8090". The comet binary serves the page at / only
	// when it is set, since a page that cannot reach the API cannot send.
	APIBase string `yaml:"api_base" help:"cmd/comet: base URL of logic's API (http://host:8090) for the demo page; set: the page is served at / (list the comet's origin in logic.allowed_origins); empty: no page"`
	// DevToken: see devTokenMeta. Not a configuration key.
	DevToken string `yaml:"-"`
}

// DevToken is the path of a development token endpoint the page fetches
// its token from (GET DevToken?uid=&name= -> {"token"}); empty: the page
// connects without a token. Only the all-in-one binary sets it, never
// from configuration.
func (c *Config) devTokenMeta() string {
	if c.DevToken == "" {
		return ""
	}
	return `<meta name="danmaku-dev-token" content="` + html.EscapeString(c.DevToken) + `">`
}

// Validate checks the section.
func (c *Config) Validate() error {
	if c.APIBase == "" {
		return nil
	}
	u, err := url.Parse(c.APIBase)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return config.Invalid("api_base", `want an absolute http(s) URL without a path, like "http://localhost:8090"`)
	}
	return nil
}

// Files returns the embedded files, rooted at the served paths.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory exists
	}
	return sub
}

// Handler serves the embedded files, the page set up for c.APIBase.
// Unknown paths and methods get the service's JSON error body; directory
// listings are never shown. Responses carry a short cache lifetime so a
// new binary's page is picked up on reload.
func Handler(c Config) http.Handler {
	files := Files()
	page := indexPage(files, "index.html", strings.TrimRight(c.APIBase, "/"), c.devTokenMeta())
	vodPage := indexPage(files, "vod.html", strings.TrimRight(c.APIBase, "/"), "")
	server := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !readOnly(w, r) {
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/")
		if name != "" {
			// The console belongs next to the admin API (Console), not on
			// every page server.
			if strings.HasPrefix(name, "admin/") {
				name = "-" // not a file: 404
			}
			if !found(w, r, files, name) {
				return
			}
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if name == "" || name == "index.html" {
			http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(page))
			return
		}
		if name == "vod.html" {
			http.ServeContent(w, r, "vod.html", time.Time{}, bytes.NewReader(vodPage))
			return
		}
		server.ServeHTTP(w, r)
	})
}

// readOnly answers a request that is not a GET or HEAD with 405 and
// reports whether it is one.
func readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	httpx.WriteError(w, danmaku.Errorf(danmaku.CodeMethod, "method", "%s not allowed, use GET", r.Method))
	return false
}

// found reports whether files has the file name, answering 404 when not
// (a directory is not a file).
func found(w http.ResponseWriter, r *http.Request, files fs.FS, name string) bool {
	if st, err := fs.Stat(files, name); err == nil && !st.IsDir() {
		return true
	}
	httpx.WriteError(w, danmaku.Errorf(danmaku.ENOTFOUND, "path", "no file %s", r.URL.Path))
	return false
}

// indexPage is the page name (index.html, vod.html) with the API base in
// its danmaku-api meta tag, followed by extra (more head elements).
func indexPage(files fs.FS, name, apiBase, extra string) []byte {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		panic(err) // embedded
	}
	const tag = `<meta name="danmaku-api" content="">`
	return bytes.Replace(b, []byte(tag), []byte(`<meta name="danmaku-api" content="`+html.EscapeString(apiBase)+`">`+extra), 1)
}
