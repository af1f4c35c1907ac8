package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testSecret is a valid HS256 secret (32 bytes).
var testSecret = []byte("0123456789abcdef0123456789abcdef")

// RSA key generation costs tens of milliseconds; the tests share a few keys.
var rsaKeys = sync.OnceValue(func() [3]*rsa.PrivateKey {
	var ks [3]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

func mustECKey(tb testing.TB, curve elliptic.Curve) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// pemPublic returns the PKIX "PUBLIC KEY" PEM encoding of pub.
func pemPublic(tb testing.TB, pub any) []byte {
	tb.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// writeFile writes b to a new file in tb's temp dir and returns its path.
func writeFile(tb testing.TB, name string, b []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// claims returns valid wire claims for user 42, expiring in an hour.
func claims() *wireClaims {
	return &wireClaims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   "42",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}}
}

// sign signs c with method and key through the jwt library.
func sign(tb testing.TB, method jwt.SigningMethod, key any, c jwt.Claims) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func mustVerifier(tb testing.TB, cfg Config) *Verifier {
	tb.Helper()
	v, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
