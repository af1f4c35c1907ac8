package comet

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/httpx"
)

// codeForbidden is the error frame of a join the viewer's token does not
// allow; the viewer stays in its room.
const codeForbidden = danmaku.CodeFrameForbidden

// viewer authenticates a /ws request and returns the viewer's user id and,
// with auth on, its verified claims (nil with auth off). With auth off the
// uid query parameter is taken as given (it only groups a user's tabs).
// With auth on the token comes from the token query parameter (browsers
// cannot set headers on a WebSocket) or "Authorization: Bearer"; the user
// is the token's sub, and a uid parameter naming somebody else is refused.
func (s *Server) viewer(r *http.Request) (uid string, claims *auth.Claims, err error) {
	q := r.URL.Query()
	uid = q.Get("uid")
	if uid != "" {
		if err := danmaku.CheckID("uid", uid); err != nil {
			s.metrics.rejected("bad_uid")
			return "", nil, err
		}
	}
	if s.verifier == nil {
		return uid, nil, nil
	}
	tok := q.Get("token")
	if tok == "" {
		tok = auth.BearerToken(r)
	}
	c, err := s.verifier.Verify(tok)
	if err != nil {
		s.metrics.rejected("token")
		return "", nil, err
	}
	if uid != "" && uid != c.Subject() {
		s.metrics.rejected("token")
		return "", nil, danmaku.Errorf(danmaku.CodeForbidden, "uid", "does not match the token's user")
	}
	return c.Subject(), &c, nil
}

// mayJoin reports whether the connection's token allows room (always, with
// auth off or a token without a rooms claim).
func (c *conn) mayJoin(room string) bool {
	return c.claims == nil || c.claims.AllowsRoom(room)
}

// checkBearer compares the request's bearer token with secret in constant
// time.
func checkBearer(r *http.Request, secret string) bool {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(secret)) == 1
}

// originAllowed applies Config.AllowedOrigins. Without an Origin header the
// client is not a browser (no cross-site risk) and is allowed. With an
// empty list only the page's own host may connect.
func originAllowed(allowed []string, r *http.Request) bool {
	return httpx.OriginAllowed(allowed, r)
}

// remoteIP is the connection's peer address without the port. Proxies are
// not trusted: behind one, run the limit there.
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ipLimiter counts open connections per remote IP.
type ipLimiter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newIPLimiter(max int) *ipLimiter { return &ipLimiter{max: max, n: map[string]int{}} }

// acquire takes a slot for ip, or reports false when ip is at its limit.
func (l *ipLimiter) acquire(ip string) bool {
	if l.max == 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[ip] >= l.max {
		return false
	}
	l.n[ip]++
	return true
}

func (l *ipLimiter) release(ip string) {
	if l.max == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[ip] <= 1 {
		delete(l.n, ip)
		return
	}
	l.n[ip]--
}
