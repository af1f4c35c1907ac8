package httpx

import (
	"net/http"
	"net/url"
	"strings"
)

// OriginAllowed reports whether a browser request may be served: allowed
// lists exact Origin values or "*" for any; empty allows only the
// request's own host. A request without an Origin header does not come
// from a cross-site page (non-browser clients send none) and is allowed.
func OriginAllowed(allowed []string, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if len(allowed) == 0 {
		u, err := url.Parse(origin)
		return err == nil && strings.EqualFold(u.Host, r.Host)
	}
	for _, a := range allowed {
		if a == "*" || strings.EqualFold(a, origin) {
			return true
		}
	}
	return false
}
