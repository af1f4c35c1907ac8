package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/danmaku/danmaku"
)

// Mint returns an HS256 token for c signed with secret, which a Verifier
// configured with the same hmac_secret accepts. It is meant for tests, for
// development-only token endpoints and for `danmaku token`; production
// tokens come from the application that owns the users. c.UID and c.ExpiresAt are required;
// c.Rooms nil omits the claim (any room) and an empty slice writes [] (no
// room); c.Roles empty omits the roles claim. Errors are EINVALID.
func Mint(secret []byte, c Claims) (string, error) {
	if len(secret) < MinHMACSecret {
		return "", danmaku.Errorf(danmaku.EINVALID, "secret", "must be at least %d bytes", MinHMACSecret)
	}
	return signClaims(jwt.SigningMethodHS256, secret, c)
}

// MintPEM returns a token for c signed with the private key in keyPEM: an
// RSA key of 2048 bits or more signs RS256, an EC P-256 key ES256, the
// algorithms a Verifier holding the matching public key accepts. PKCS#1,
// SEC 1 and PKCS#8 blocks are read. Errors are EINVALID.
func MintPEM(keyPEM []byte, c Claims) (string, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return "", danmaku.Errorf(danmaku.EINVALID, "key", "no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return "", danmaku.Errorf(danmaku.EINVALID, "key", "a %q block is not a private key", block.Type)
	}
	if err != nil {
		return "", danmaku.Errorf(danmaku.EINVALID, "key", "%v", err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < MinRSABits {
			return "", danmaku.Errorf(danmaku.EINVALID, "key", "RSA key of %d bits, need at least %d", k.N.BitLen(), MinRSABits)
		}
		return signClaims(jwt.SigningMethodRS256, k, c)
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return "", danmaku.Errorf(danmaku.EINVALID, "key", "EC key on curve %s, only P-256 (ES256) is accepted", k.Curve.Params().Name)
		}
		return signClaims(jwt.SigningMethodES256, k, c)
	}
	return "", danmaku.Errorf(danmaku.EINVALID, "key", "a %T key signs no algorithm the servers accept", key)
}

// signClaims checks c and signs it with key.
func signClaims(method jwt.SigningMethod, key any, c Claims) (string, error) {
	switch {
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
	if err := checkRoles(c.Roles); err != nil {
		return "", danmaku.Errorf(danmaku.EINVALID, "roles", "%s", err.(*danmaku.Error).Message)
	}
	if c.Density != nil && (*c.Density < 0 || *c.Density > MaxDensity) {
		return "", danmaku.Errorf(danmaku.EINVALID, "density", "must be between 0 and %d", MaxDensity)
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
		Name:    c.Name,
		Roles:   c.Roles,
		Density: c.Density,
	}
	if c.Rooms != nil {
		wc.Rooms = &c.Rooms
	}
	return jwt.NewWithClaims(method, wc).SignedString(key)
}

func numericDate(t time.Time) *jwt.NumericDate {
	if t.IsZero() {
		return nil
	}
	return jwt.NewNumericDate(t)
}
