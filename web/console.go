package web

import (
	"bytes"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

// ConsolePath is where the moderator console is served: next to logic's
// admin API, which it calls on its own origin.
const ConsolePath = "/admin/"

// consoleCSP keeps the console to its own scripts and styles: a comment
// that slipped through as markup could run nothing. Connections may go to
// another origin (a comet's /ws when logic serves the console).
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self' ws: wss: http: https:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Console serves the moderator console (static/admin) under ConsolePath,
// with the client library at ConsolePath + "danmaku.js". Mount it at
// ConsolePath on the listener of logic's admin API. Like Handler it
// answers unknown paths and methods with the JSON error body; it never
// caches and may not be framed.
func Console() http.Handler {
	files := Files()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !readOnly(w, r) {
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, ConsolePath)
		switch {
		case !ok:
			name = "-" // not under the console: not found
		case name == "":
			name = "admin/index.html"
		case name == "danmaku.js":
		default:
			name = "admin/" + name
		}
		if !found(w, r, files, name) {
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", consoleCSP)
		b, err := fs.ReadFile(files, name)
		if err != nil {
			panic(err) // embedded, and Stat found it
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}
