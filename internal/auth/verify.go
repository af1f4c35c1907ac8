package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/golang-jwt/jwt/v5"

	"github.com/danmaku/danmaku"
)

// Limits on what a token may carry. They bound the work spent on input
// from anybody on the internet before the signature is known to be good.
const (
	MaxTokenLen = 8 << 10
	MaxRooms    = 256
	MaxRoles    = 32
	MaxDensity  = 1 << 20
)

// The roles a token's "roles" claim may grant that the servers act on.
// Other role names are accepted and carried, for the application's own
// use.
const (
	// RoleModerator moderates the rooms of the token's rooms claim and may
	// send high-priority messages.
	RoleModerator = "moderator"
	// RoleMember may send in members-only rooms.
	RoleMember = "member"
	// RolePriority may send high-priority messages (for example a backend
	// that posts paid messages under the payer's id).
	RolePriority = "priority"
)

// Claims is what a verified token says about its holder.
type Claims struct {
	// UID is the user id ("sub"), positive.
	UID int64
	// Name is the display name ("name"), may be empty.
	Name string
	// Rooms are the room ids and "prefix*" patterns the token may use
	// ("rooms"). nil means any room; an empty non-nil slice means none.
	Rooms []string
	// Roles are the roles the token grants ("roles"), nil when it grants
	// none.
	Roles []string
	// Density is the viewer's density cap ("density": normal messages a
	// second per room, 0 every message), nil when the token sets none; a
	// density the viewer asks for itself wins over it.
	Density *int
	// Issuer ("iss") and Audience ("aud") are optional.
	Issuer   string
	Audience []string
	// ExpiresAt ("exp") is required; NotBefore ("nbf") and IssuedAt ("iat")
	// are zero when absent.
	ExpiresAt time.Time
	NotBefore time.Time
	IssuedAt  time.Time
}

// Subject returns the user id in the decimal form of the "sub" claim, the
// form the WebSocket door and the Redis keys use.
func (c *Claims) Subject() string { return strconv.FormatInt(c.UID, 10) }

// AllowsRoom reports whether the token may be used for room: any room when
// the token has no rooms claim, else a room equal to an entry or starting
// with the part of a "prefix*" entry before the star ("*" alone allows all).
func (c *Claims) AllowsRoom(room string) bool {
	if c.Rooms == nil {
		return true
	}
	for _, p := range c.Rooms {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(room, prefix) {
				return true
			}
		} else if p == room {
			return true
		}
	}
	return false
}

// HasRole reports whether the token grants role.
func (c *Claims) HasRole(role string) bool {
	return slices.Contains(c.Roles, role)
}

// wireClaims is the JSON payload. Rooms is a pointer so that an absent
// claim (any room) and an empty list (no room) stay distinct.
type wireClaims struct {
	jwt.RegisteredClaims
	Name  string    `json:"name,omitempty"`
	Rooms *[]string `json:"rooms,omitempty"`
	Roles []string  `json:"roles,omitempty"`
	// Density is a pointer so that an absent claim and 0 (every message)
	// stay distinct.
	Density *int `json:"density,omitempty"`
}

// Verifier checks tokens. It is safe for concurrent use.
type Verifier struct {
	parser *jwt.Parser
	hmac   []byte
	rsa    jwt.VerificationKeySet
	ec     jwt.VerificationKeySet
	issuer string
	aud    string
}

// New returns a Verifier for cfg, which it validates (reading the key
// files).
func New(cfg Config) (*Verifier, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ks, err := loadKeys(cfg.PublicKeys)
	if err != nil {
		return nil, err
	}
	opts := []jwt.ParserOption{jwt.WithExpirationRequired(), jwt.WithLeeway(cfg.Leeway)}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v := &Verifier{parser: jwt.NewParser(opts...), issuer: cfg.Issuer, aud: cfg.Audience}
	if cfg.HMACSecret != "" {
		v.hmac = []byte(cfg.HMACSecret)
	}
	v.rsa.Keys = toVerificationKeys(ks.rsa)
	v.ec.Keys = toVerificationKeys(ks.ec)
	return v, nil
}

func toVerificationKeys(keys []any) []jwt.VerificationKey {
	out := make([]jwt.VerificationKey, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out
}

// Algorithms lists the algorithms v accepts, for logs and docs.
func (v *Verifier) Algorithms() []string {
	var algs []string
	if v.hmac != nil {
		algs = append(algs, "HS256")
	}
	if len(v.rsa.Keys) > 0 {
		algs = append(algs, "RS256")
	}
	if len(v.ec.Keys) > 0 {
		algs = append(algs, "ES256")
	}
	return algs
}

// Verify checks token's signature and claims and returns the claims. Every
// error is a *danmaku.Error with code EUNAUTH.
func (v *Verifier) Verify(token string) (Claims, error) {
	if token == "" {
		return Claims{}, unauth("missing token")
	}
	if len(token) > MaxTokenLen {
		return Claims{}, unauth("token longer than 8 KiB")
	}
	var wc wireClaims
	if _, err := v.parser.ParseWithClaims(token, &wc, v.key); err != nil {
		return Claims{}, v.explain(err, &wc)
	}
	return checkClaims(&wc)
}

// key picks the keys for the token's algorithm. The algorithm is pinned by
// key type: HS256 gets only the HMAC secret, RS256 only RSA keys, ES256
// only P-256 keys, anything else nothing.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	alg, _ := t.Header["alg"].(string)
	switch {
	case alg == "HS256" && v.hmac != nil:
		return v.hmac, nil
	case alg == "RS256" && len(v.rsa.Keys) > 0:
		return v.rsa, nil
	case alg == "ES256" && len(v.ec.Keys) > 0:
		return v.ec, nil
	}
	return nil, errWrongAlg
}

var errWrongAlg = errors.New("algorithm not accepted")

// explain turns a jwt error into an EUNAUTH error with a fixed message.
func (v *Verifier) explain(err error, wc *wireClaims) error {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, errWrongAlg):
		return unauth("wrong algorithm (accepted: " + strings.Join(v.Algorithms(), ", ") + ")")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return unauth("bad signature")
	case errors.As(err, &typeErr):
		return unauth("claim " + strconv.Quote(claimName(typeErr.Field)) + " has the wrong JSON type")
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauth("malformed token")
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// The parser knows no such algorithm.
		return unauth("wrong algorithm (accepted: " + strings.Join(v.Algorithms(), ", ") + ")")
	case errors.Is(err, jwt.ErrTokenExpired):
		return unauth("token expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return unauth("token not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return unauth("wrong issuer")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return unauth("wrong audience")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		switch {
		case wc.ExpiresAt == nil:
			return unauth("missing exp")
		case v.issuer != "" && wc.Issuer == "":
			return unauth("missing iss")
		default:
			return unauth("missing aud")
		}
	}
	return unauth("invalid token")
}

// claimName keeps only a known claim name from a JSON type error's field
// path (e.g. "RegisteredClaims.sub"), so nothing else of the token reaches
// the message.
func claimName(path string) string {
	name := path[strings.LastIndexByte(path, '.')+1:]
	switch name {
	case "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "name", "rooms", "roles", "density":
		return name
	}
	return "?"
}

// checkClaims applies the rules jwt does not know: sub is a user id, name
// is printable, rooms are ids or patterns.
func checkClaims(wc *wireClaims) (Claims, error) {
	uid, err := strconv.ParseInt(wc.Subject, 10, 64)
	if err != nil || uid <= 0 || strconv.FormatInt(uid, 10) != wc.Subject {
		if wc.Subject == "" {
			return Claims{}, unauth("missing sub")
		}
		return Claims{}, unauth("bad sub: must be a positive decimal user id without leading zeros")
	}
	for _, r := range wc.Name {
		if unicode.IsControl(r) {
			return Claims{}, unauth("bad name: control character")
		}
	}
	c := Claims{
		UID:       uid,
		Name:      wc.Name,
		Issuer:    wc.Issuer,
		Audience:  wc.Audience,
		ExpiresAt: wc.ExpiresAt.Time,
	}
	if wc.NotBefore != nil {
		c.NotBefore = wc.NotBefore.Time
	}
	if wc.IssuedAt != nil {
		c.IssuedAt = wc.IssuedAt.Time
	}
	if wc.Rooms != nil {
		if err := checkRooms(*wc.Rooms); err != nil {
			return Claims{}, err
		}
		c.Rooms = *wc.Rooms
		if c.Rooms == nil {
			c.Rooms = []string{}
		}
	}
	if len(wc.Roles) > 0 {
		if err := checkRoles(wc.Roles); err != nil {
			return Claims{}, err
		}
		c.Roles = wc.Roles
	}
	if d := wc.Density; d != nil {
		if *d < 0 || *d > MaxDensity {
			return Claims{}, unauth("bad density: must be between 0 and " + strconv.Itoa(MaxDensity))
		}
		c.Density = d
	}
	return c, nil
}

// checkRoles requires each role to be a name of 1 to 64 lowercase
// letters, digits, '_', '-' or '.'.
func checkRoles(roles []string) error {
	if len(roles) > MaxRoles {
		return unauth("bad roles: more than " + strconv.Itoa(MaxRoles) + " entries")
	}
	for i, r := range roles {
		ok := len(r) > 0 && len(r) <= 64
		for j := 0; ok && j < len(r); j++ {
			c := r[j]
			ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
		}
		if !ok {
			return unauth("bad roles: entry " + strconv.Itoa(i) + " is not a role name (lowercase letters, digits, _ - .)")
		}
	}
	return nil
}

// checkRooms requires each entry to be a room id, or a room id prefix
// (possibly empty) followed by "*".
func checkRooms(rooms []string) error {
	if len(rooms) > MaxRooms {
		return unauth("bad rooms: more than " + strconv.Itoa(MaxRooms) + " entries")
	}
	for i, p := range rooms {
		prefix, wild := strings.CutSuffix(p, "*")
		if wild && prefix == "" {
			continue
		}
		if danmaku.CheckID("rooms", prefix) != nil {
			return unauth("bad rooms: entry " + strconv.Itoa(i) + " is not a room id or prefix* pattern")
		}
	}
	return nil
}

func unauth(msg string) *danmaku.Error {
	return &danmaku.Error{Code: danmaku.EUNAUTH, Field: "token", Message: msg}
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header (scheme case-insensitive), or "" when there is none.
func BearerToken(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
