package comet

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// MintToken returns a viewer token for uid valid until exp:
//
//	base64url(HMAC-SHA256(secret, uid + "." + expUnix)) + "." + expUnix
//
// (base64url without padding, expUnix in decimal seconds). The site that
// authenticates its users mints it and puts it in the /ws URL.
func MintToken(secret []byte, uid string, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return base64.RawURLEncoding.EncodeToString(tokenMAC(secret, uid, e)) + "." + e
}

func tokenMAC(secret []byte, uid, exp string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(uid))
	m.Write([]byte{'.'})
	m.Write([]byte(exp))
	return m.Sum(nil)
}

// verifyToken checks a token minted by MintToken for uid at time now.
func verifyToken(secret []byte, uid, token string, now time.Time) error {
	sig, exp, ok := strings.Cut(token, ".")
	if !ok || sig == "" || exp == "" {
		return danmaku.Errorf(danmaku.EUNAUTH, "token", "malformed token")
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return danmaku.Errorf(danmaku.EUNAUTH, "token", "malformed token expiry")
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, tokenMAC(secret, uid, exp)) {
		return danmaku.Errorf(danmaku.EUNAUTH, "token", "token does not match uid")
	}
	if now.Unix() >= e {
		return danmaku.Errorf(danmaku.EUNAUTH, "token", "token expired")
	}
	return nil
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
