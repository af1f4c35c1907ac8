package comet

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The public listener serves the demo page and the client library next to
// /ws, so a comet behind an edge needs no separate static server.
func TestPublicListenerServesThePage(t *testing.T) {
	s, _ := mustStart(t, nil)
	for path, want := range map[string]string{"/": "<html", "/danmaku.js": "WebSocket"} {
		resp, err := http.Get("http://" + s.PublicAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(strings.ToLower(string(body)), strings.ToLower(want)) {
			t.Fatalf("GET %s: %d, %d bytes without %q", path, resp.StatusCode, len(body), want)
		}
	}
}
