package comet

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/httpx"
)

// Error frames of a join the viewer's token does not allow; the viewer
// stays in its rooms.
const (
	codeForbidden    = danmaku.CodeFrameForbidden // the room is not in the token's rooms
	codeTokenExpired = danmaku.CodeTokenExpired   // the token expired after the socket opened
)

// viewer authenticates a /ws request and returns the viewer's user id and
// its verified claims (nil when it showed no token). The token comes from
// the token query parameter (browsers cannot set headers on a WebSocket)
// or "Authorization: Bearer"; the user is then the token's sub, and a uid
// parameter naming somebody else is refused. With auth on a token is
// required. With auth off it is optional and checked when the comet has
// keys: a token proves the uid, while a bare uid parameter is a claim,
// which only groups a user's tabs and names the connection in Redis; user
// notices go only to proven uids (see proven).
func (s *Server) viewer(r *http.Request) (uid string, claims *auth.Claims, err error) {
	q := r.URL.Query()
	uid = q.Get("uid")
	if uid != "" {
		if err := danmaku.CheckID("uid", uid); err != nil {
			s.metrics.rejected("bad_uid")
			return "", nil, err
		}
	}
	tok := q.Get("token")
	if tok == "" {
		tok = auth.BearerToken(r)
	}
	if s.verifier == nil || (tok == "" && !s.authOn) {
		return uid, nil, nil
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

// proven reports whether the connection's user id was proven by a token,
// so it may receive the user's notices.
func (c *conn) proven() bool { return c.claims != nil }

// mayJoin checks that the connection's token allows room: always with
// no token or a token without a rooms claim; never once the token has
// expired (the socket keeps the rooms it holds, it joins no more). It
// answers a refusal with an error frame about room and counts it.
func (c *conn) mayJoin(room string) bool {
	switch {
	case c.claims == nil:
		return true
	case !c.claims.ExpiresAt.IsZero() && time.Now().After(c.claims.ExpiresAt):
		c.s.metrics.rejected("token_expired")
		c.sendRoomError(room, codeTokenExpired, "room "+room+": the token has expired; reconnect with a fresh one to join rooms")
		return false
	case !c.claims.AllowsRoom(room):
		c.s.metrics.rejected("forbidden_room")
		c.sendRoomError(room, codeForbidden, "room "+room+": not allowed by the token")
		return false
	}
	return true
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
// client is not a browser (no cross-site risk) and is allowed. A listed
// origin must match exactly, scheme included. With an empty list only the
// page's own host may connect: an http or https origin (https when the
// request came over TLS) naming the Host header. A Host that is a DNS name
// passes only with Config.AllowHostOrigin: in a DNS rebinding attack the
// attacker's name resolves to this comet, so Host and Origin both name the
// attacker's site; IP addresses and localhost cannot be rebound.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.cfg.AllowedOrigins) > 0 {
		return httpx.OriginAllowed(s.cfg.AllowedOrigins, r)
	}
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Host, r.Host) || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if !strings.EqualFold(u.Scheme, scheme) {
		return false
	}
	return s.cfg.AllowHostOrigin || unbindable(u.Hostname())
}

// unbindable reports whether host is an IP address or localhost, names
// that DNS rebinding cannot point elsewhere.
func unbindable(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost")
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

// ipLimiter counts open connections per client: per IPv4 address, per
// IPv6 network of the configured prefix length. max and mask never
// change; mu guards n, which the HTTP handlers (acquire) and the readers'
// release (release) change.
type ipLimiter struct {
	max  int
	mask net.IPMask // for IPv6 addresses
	mu   sync.Mutex
	n    map[string]int
}

func newIPLimiter(max, v6prefix int) *ipLimiter {
	return &ipLimiter{max: max, mask: net.CIDRMask(v6prefix, 128), n: map[string]int{}}
}

// key is what ip counts against: itself, or its IPv6 network.
func (l *ipLimiter) key(ip string) string {
	a := net.ParseIP(ip)
	if a == nil || a.To4() != nil {
		return ip
	}
	return (&net.IPNet{IP: a.Mask(l.mask), Mask: l.mask}).String()
}

// acquire takes a slot for ip and returns the key to release, or reports
// false when ip's key is at its limit.
func (l *ipLimiter) acquire(ip string) (string, bool) {
	if l.max == 0 {
		return "", true
	}
	k := l.key(ip)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[k] >= l.max {
		return "", false
	}
	l.n[k]++
	return k, true
}

func (l *ipLimiter) release(k string) {
	if l.max == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[k] <= 1 {
		delete(l.n, k)
		return
	}
	l.n[k]--
}
