// Package web holds the browser side of the service: danmaku.js, a plain
// JavaScript client library (no build step), and a demo page that uses it.
// Both are embedded in the binary; Handler serves them, so any server that
// also serves /ws and /logic/* on the same origin can host the demo.
//
// Routes:
//
//	/             the demo page (index.html)
//	/danmaku.js   the client library
//	/demo.css, /demo.js   the page's style and script
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Files returns the embedded files, rooted at the served paths.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory exists
	}
	return sub
}

// Handler serves the embedded files. Unknown paths get 404; directory
// listings are never shown. Responses carry a short cache lifetime so a
// new binary's page is picked up on reload.
func Handler() http.Handler {
	files := http.FileServerFS(Files())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path != "/" && (len(r.URL.Path) == 0 || r.URL.Path[len(r.URL.Path)-1] == '/') {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		files.ServeHTTP(w, r)
	})
}
