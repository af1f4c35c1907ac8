package comet

import (
	"context"
	"net/http"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

func healthz(closing func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if closing() {
			httpx.WriteError(w, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "shutting down"))
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// readyz answers 200 while ready reports no error, else the error (503
// for every error Server.Ready returns).
func readyz(ready func(context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context()); err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}

var (
	errShuttingDown = danmaku.Errorf(danmaku.EUNAVAILABLE, "", "shutting down")
	errRebuilding   = danmaku.Errorf(danmaku.EUNAVAILABLE, "", "registering viewers again after redis lost them")
	errRedisDown    = danmaku.Errorf(danmaku.EUNAVAILABLE, "", "redis did not answer the last lease renewal")
)

// notFound answers paths no handler serves with the JSON error body, so
// every answer of both listeners has one shape.
func notFound(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, danmaku.Errorf(danmaku.ENOTFOUND, "path", "no endpoint %s", r.URL.Path))
}

// publicRoute is a handler mounted on the public listener by HandlePublic.
type publicRoute struct {
	pattern string
	h       http.Handler
}

// HandlePublic mounts h at pattern (http.ServeMux syntax) on the public
// listener next to /ws and /healthz, for what the binary embedding the
// comet serves to browsers (the demo page, say). Call it before Start.
// Without a handler for "/", unknown paths get a JSON 404.
func (s *Server) HandlePublic(pattern string, h http.Handler) {
	s.public = append(s.public, publicRoute{pattern, h})
}

// handshakeError answers a /ws request that is not a valid WebSocket
// handshake (gorilla's Upgrader.Error) with the JSON error body instead of
// the library's text.
func handshakeError(w http.ResponseWriter, r *http.Request, status int, reason error) {
	if status == http.StatusMethodNotAllowed || r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		httpx.WriteError(w, danmaku.Errorf(danmaku.CodeMethod, "method", "%s not allowed, /ws takes a GET WebSocket handshake", r.Method))
		return
	}
	httpx.WriteError(w, danmaku.Errorf(danmaku.EINVALID, "",
		"not a WebSocket handshake: /ws takes a WebSocket client (Connection: Upgrade, Upgrade: websocket, Sec-WebSocket-Version: 13)"))
}
