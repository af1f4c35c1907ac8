package auth

import (
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/danmaku/danmaku"
)

// Mint returns an HS256 token for c signed with secret, which a Verifier
// configured with the same hmac_secret accepts. It is meant for tests and
// for development-only token endpoints; production tokens come from the
// application that owns the users. c.UID and c.ExpiresAt are required;
// c.Rooms nil omits the claim (any room) and an empty slice writes [] (no
// room). Errors are EINVALID.
func Mint(secret []byte, c Claims) (string, error) {
	switch {
	case len(secret) < MinHMACSecret:
		return "", danmaku.Errorf(danmaku.EINVALID, "secret", "must be at least %d bytes", MinHMACSecret)
	case c.UID <= 0:
		return "", danmaku.Errorf(danmaku.EINVALID, "uid", "must be positive")
	case c.ExpiresAt.IsZero():
		return "", danmaku.Errorf(danmaku.EINVALID, "exp", "must be set")
	}
	if c.Rooms != nil {
		if err := checkRooms(c.Rooms); err != nil {
			return "", danmaku.Errorf(danmaku.EINVALID, "rooms", "%s", err.(*danmaku.Error).Message)
		}
	}
	wc := wireClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   c.Subject(),
			Issuer:    c.Issuer,
			Audience:  c.Audience,
			ExpiresAt: jwt.NewNumericDate(c.ExpiresAt),
			NotBefore: numericDate(c.NotBefore),
			IssuedAt:  numericDate(c.IssuedAt),
		},
		Name: c.Name,
	}
	if c.Rooms != nil {
		wc.Rooms = &c.Rooms
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, wc).SignedString(secret)
}

func numericDate(t time.Time) *jwt.NumericDate {
	if t.IsZero() {
		return nil
	}
	return jwt.NewNumericDate(t)
}
