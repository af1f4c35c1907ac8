package auth

import (
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/danmaku/danmaku/internal/config"
)

func TestConfigValidate(t *testing.T) {
	rk := rsaKeys()[2]
	ecPEM := pemPublic(t, &mustECKey(t, elliptic.P256()).PublicKey)
	good := writeFile(t, "good.pem", ecPEM)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ecPriv, err := x509.MarshalECPrivateKey(mustECKey(t, elliptic.P256()))
	if err != nil {
		t.Fatal(err)
	}
	secret := string(testSecret)
	cases := []struct {
		name, field, want string
		cfg               Config
	}{
		{"nothing set", "hmac_secret", "set hmac_secret or public_keys", Config{}},
		{"short secret", "hmac_secret", "at least 32 bytes", Config{HMACSecret: "change-me"}},
		{"negative leeway", "leeway", "between", Config{HMACSecret: secret, Leeway: -time.Second}},
		{"huge leeway", "leeway", "between", Config{HMACSecret: secret, Leeway: time.Hour}},
		{"missing file", "public_keys[1]", "no such file", Config{PublicKeys: []string{good, filepath.Join(t.TempDir(), "nope.pem")}}},
		{"empty path", "public_keys[0]", "empty path", Config{PublicKeys: []string{""}}},
		{"not PEM", "public_keys[0]", "no PEM block", Config{PublicKeys: []string{writeFile(t, "x.pem", []byte("hello"))}}},
		{"private key", "public_keys[0]", "EC PRIVATE KEY", Config{PublicKeys: []string{
			writeFile(t, "priv.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecPriv}))}}},
		{"P-384 key", "public_keys[0]", "only P-256", Config{PublicKeys: []string{
			writeFile(t, "p384.pem", pemPublic(t, &mustECKey(t, elliptic.P384()).PublicKey))}}},
		{"small RSA key", "public_keys[0]", "1024 bits", Config{PublicKeys: []string{
			writeFile(t, "small.pem", pemPublic(t, &small.PublicKey))}}},
		{"bad DER", "public_keys[0]", "", Config{PublicKeys: []string{
			writeFile(t, "der.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}))}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Message, tc.want) {
				t.Fatalf("Validate = %v, want field %s saying %q", err, tc.field, tc.want)
			}
			if _, err := New(tc.cfg); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}

	// Every supported block type, and several blocks in one file.
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rk.PublicKey)})
	bundle := writeFile(t, "bundle.pem", append(pkcs1, ecPEM...))
	cfg := Config{HMACSecret: secret, PublicKeys: []string{bundle, writeFile(t, "cert.pem", selfSigned(t, rk))}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, cfg)
	if len(v.rsa.Keys) != 2 || len(v.ec.Keys) != 1 {
		t.Fatalf("loaded %d RSA and %d EC keys, want 2 and 1", len(v.rsa.Keys), len(v.ec.Keys))
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodRS256, rk, claims())); err != nil {
		t.Fatal(err)
	}
}

// selfSigned returns a PEM certificate for k's public key.
func selfSigned(tb testing.TB, k *rsa.PrivateKey) []byte {
	tb.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
