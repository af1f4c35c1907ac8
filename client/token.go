package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Role names of a token's roles claim, as the servers know them.
const (
	// RoleModerator moderates the rooms of the token's rooms claim and
	// may send high-priority messages.
	RoleModerator = "moderator"
	// RoleMember may send in members-only rooms.
	RoleMember = "member"
	// RolePriority may send high-priority messages (a paid-message
	// backend, say).
	RolePriority = "priority"
)

// Token holds the claims of a token for one user: what a site's backend
// mints for each logged-in user so that the servers know who sends and
// watches (docs/protocol.md, "Tokens").
type Token struct {
	// UID is the user ("sub", written as a decimal string); required,
	// positive.
	UID int64
	// Name is the display name shown with the user's comments ("name").
	Name string
	// Rooms are the room ids and "prefix*" patterns the token may use
	// ("rooms"); nil leaves the claim out (any room), an empty non-nil
	// slice allows none.
	Rooms []string
	// Roles are the user's roles ("roles"): RoleModerator, RoleMember,
	// RolePriority.
	Roles []string
	// TTL is how long the token is valid from now ("exp"); default an
	// hour. ExpiresAt, when set, wins.
	TTL       time.Duration
	ExpiresAt time.Time
	// Issuer ("iss") and Audience ("aud") are checked by servers
	// configured with auth.issuer and auth.audience.
	Issuer   string
	Audience []string
}

// claims is the JSON payload the servers decode.
type claims struct {
	jwt.RegisteredClaims
	Name  string    `json:"name,omitempty"`
	Rooms *[]string `json:"rooms,omitempty"`
	Roles []string  `json:"roles,omitempty"`
}

// minHMACSecret is the shortest HS256 secret the servers accept.
const minHMACSecret = 32

// HS256 signs the token with secret, the servers' auth.hmac_secret (at
// least 32 bytes).
func (t Token) HS256(secret []byte) (string, error) {
	if len(secret) < minHMACSecret {
		return "", fmt.Errorf("mint token: the secret must be at least %d bytes", minHMACSecret)
	}
	return t.sign(jwt.SigningMethodHS256, secret)
}

// Sign signs the token with the private key in keyPEM (PKCS#1, SEC 1 or
// PKCS#8): an RSA key (2048 bits or more) signs RS256, an EC P-256 key
// ES256, which servers holding the public key in auth.public_keys accept.
func (t Token) Sign(keyPEM []byte) (string, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return "", errors.New("mint token: no PEM block in the key")
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return "", fmt.Errorf("mint token: %s block: %w", block.Type, err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return "", fmt.Errorf("mint token: RSA key of %d bits, the servers need 2048 or more", k.N.BitLen())
		}
		return t.sign(jwt.SigningMethodRS256, k)
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("mint token: EC key on %s, the servers accept P-256 (ES256) only", k.Curve.Params().Name)
		}
		return t.sign(jwt.SigningMethodES256, k)
	}
	return "", fmt.Errorf("mint token: a %T signs no algorithm the servers accept", key)
}

func (t Token) sign(m jwt.SigningMethod, key any) (string, error) {
	if t.UID <= 0 {
		return "", errors.New("mint token: UID must be positive")
	}
	exp := t.ExpiresAt
	if exp.IsZero() {
		ttl := t.TTL
		if ttl <= 0 {
			ttl = time.Hour
		}
		exp = time.Now().Add(ttl)
	}
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   strconv.FormatInt(t.UID, 10),
			Issuer:    t.Issuer,
			Audience:  t.Audience,
			ExpiresAt: jwt.NewNumericDate(exp),
			IssuedAt:  jwt.NewNumericDate(time.Now()),
		},
		Name:  t.Name,
		Roles: t.Roles,
	}
	if t.Rooms != nil {
		c.Rooms = &t.Rooms
	}
	return jwt.NewWithClaims(m, c).SignedString(key)
}
