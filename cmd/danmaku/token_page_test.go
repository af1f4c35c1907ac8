package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/web"
)

// TestBrowserPageWithURLToken is the demo page of the comet binary with
// tokens on at both doors and no token endpoint (the role binaries): a
// token in the page's address (#token=, as `danmaku token` mints it) signs
// the page in as the token's user, who joins, sends and sees the comment
// under the token's name.
func TestBrowserPageWithURLToken(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	var h atomic.Value
	pageSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Load().(http.Handler).ServeHTTP(w, r)
	}))
	defer pageSrv.Close()
	m := startMain(t, func(c *Config) {
		c.Logic.AllowedOrigins = []string{pageSrv.URL}
		c.Logic.Auth, c.Comet.Auth, c.Auth.HMACSecret = "jwt", "jwt", secret
	})
	api := strings.TrimSuffix(m.URL(), "/")
	mux := http.NewServeMux()
	mux.Handle("/ws", m.comet.PublicHandler())
	mux.Handle("/", web.Handler(web.Config{APIBase: api}))
	h.Store(http.Handler(mux))

	tok, err := auth.Mint([]byte(secret), auth.Claims{UID: 4242, Name: "Tokened Ann", Rooms: []string{"url_token"},
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tab := newBrowser(t)
	err = chromedp.Do(tab,
		chromedp.Navigate(pageSrv.URL+"/?room=url_token#token="+tok),
		chromedp.Poll[chromedp.Void](`document.querySelector("#conn").dataset.state === "open"`,
			chromedp.WithPollingTimeout(15*time.Second)),
	)
	if err != nil {
		t.Fatalf("the page with a token in its address did not connect: %v", err)
	}
	if uid := evalTo[int](t, tab, `danmakuDemo.userId`); uid != 4242 {
		t.Errorf("the page's user is %d, want the token's 4242", uid)
	}
	sendFromPage(t, tab, "signed in by the address")
	waitShows(t, tab, "the page with a token", "signed in by the address")
	if !evalTo[bool](t, tab, `[...document.querySelectorAll("#log li")].some(e => e.textContent.includes("Tokened Ann"))`) {
		t.Errorf("the comment is not shown under the token's name: %s", evalTo[string](t, tab, `document.querySelector("#log").textContent`))
	}
}
