package logic

import (
	"net/http"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// withCORS lets pages of the origins in Config.AllowedOrigins call the API
// from another origin (danmaku.js with baseUrl set). A preflight
// (OPTIONS with Access-Control-Request-Method) is answered here with 204;
// other requests get Access-Control-Allow-Origin and go on. A browser
// request from an origin not allowed is refused with 403, as the comet
// refuses such a WebSocket. Requests without an Origin header (curl, other
// services) pass unchanged.
func (s *Server) withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if !httpx.OriginAllowed(s.cfg.AllowedOrigins, r) {
			httpx.WriteError(w, danmaku.Errorf(danmaku.CodeForbidden, "origin",
				"origin %q not allowed; list it in logic.allowed_origins", origin))
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		// danmaku.js reads Retry-After of a 429.
		h.Set("Access-Control-Expose-Headers", "Retry-After")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
