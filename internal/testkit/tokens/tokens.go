// Package tokens makes keys, tokens and forged tokens for tests of the
// services that verify JWTs with package auth: a Keys value holds an HMAC
// secret and an RSA key pair whose public half is in a PEM file, so one
// Verifier accepts both HS256 and RS256, which is the setup an algorithm
// confusion attack needs.
package tokens

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/danmaku/danmaku/internal/auth"
)

// Keys are a test issuer's keys.
type Keys struct {
	Secret []byte          // HS256 secret
	RSA    *rsa.PrivateKey // RS256 signing key
	// PublicPEM is the path of the RSA public key's PEM file.
	PublicPEM string
	// pemBytes is the file's content (what a confusion attack signs with).
	pemBytes []byte
}

// RSA key generation takes tens of milliseconds; tests share two keys.
var rsaKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
	var ks [2]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

// New returns keys with a random HMAC secret and the public key written to
// a file in tb's temp dir.
func New(tb testing.TB) *Keys {
	tb.Helper()
	secret := make([]byte, 24)
	rand.Read(secret)
	k := &Keys{Secret: []byte(base64.RawURLEncoding.EncodeToString(secret)), RSA: rsaKeys()[0]}
	der, err := x509.MarshalPKIXPublicKey(&k.RSA.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	k.pemBytes = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	k.PublicPEM = filepath.Join(tb.TempDir(), "issuer.pem")
	if err := os.WriteFile(k.PublicPEM, k.pemBytes, 0o600); err != nil {
		tb.Fatal(err)
	}
	return k
}

// Config is a verifier configuration accepting HS256 with Secret and
// RS256 with the public key.
func (k *Keys) Config() auth.Config {
	return auth.Config{HMACSecret: string(k.Secret), PublicKeys: []string{k.PublicPEM}}
}

// Verifier returns a Verifier for Config.
func (k *Keys) Verifier(tb testing.TB) *auth.Verifier {
	tb.Helper()
	v, err := auth.New(k.Config())
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// Token returns a valid HS256 token for uid, named name, limited to rooms
// (nil: any room), expiring in an hour.
func (k *Keys) Token(tb testing.TB, uid int64, name string, rooms []string) string {
	tb.Helper()
	tok, err := auth.Mint(k.Secret, auth.Claims{UID: uid, Name: name, Rooms: rooms, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// RS256 returns a valid RS256 token for uid, expiring in an hour.
func (k *Keys) RS256(tb testing.TB, uid int64) string {
	tb.Helper()
	return sign(tb, jwt.SigningMethodRS256, k.RSA, claims(uid, time.Hour))
}

// Attack is a token a Verifier of the Keys must refuse.
type Attack struct {
	Name, Token string
}

// Attacks returns forged or unusable tokens for uid: expired, alg none,
// HS256 signed with the bytes of the RSA public key (algorithm confusion),
// HS256 with another secret, RS256 with another key, and a valid token
// whose payload was changed to another user.
func (k *Keys) Attacks(tb testing.TB, uid int64) []Attack {
	tb.Helper()
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims(uid, time.Hour)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		tb.Fatal(err)
	}
	valid := k.Token(tb, uid, "", nil)
	parts := strings.Split(valid, ".")
	payload, err := json.Marshal(claims(uid+1, time.Hour))
	if err != nil {
		tb.Fatal(err)
	}
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
	return []Attack{
		{"expired", sign(tb, jwt.SigningMethodHS256, k.Secret, claims(uid, -time.Minute))},
		{"alg none", none},
		{"HS256 with the RSA public key", sign(tb, jwt.SigningMethodHS256, k.pemBytes, claims(uid, time.Hour))},
		{"wrong HMAC key", sign(tb, jwt.SigningMethodHS256, []byte("another-secret-of-at-least-32-bytes!"), claims(uid, time.Hour))},
		{"RS256 by another key", sign(tb, jwt.SigningMethodRS256, rsaKeys()[1], claims(uid, time.Hour))},
		{"tampered payload", tampered},
		{"garbage", "abc"},
	}
}

func claims(uid int64, ttl time.Duration) jwt.RegisteredClaims {
	return jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(uid, 10),
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(ttl)),
	}
}

func sign(tb testing.TB, m jwt.SigningMethod, key any, c jwt.Claims) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
