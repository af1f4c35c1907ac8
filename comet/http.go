package comet

import (
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
