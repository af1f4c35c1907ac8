package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/danmaku/danmaku/internal/config"
)

// Bounds on the configuration. RFC 7518 section 3.2 requires an HS256 key
// of at least the hash size; RSA keys below 2048 bits are breakable.
const (
	MinHMACSecret = 32
	MinRSABits    = 2048
	MaxLeeway     = 5 * time.Minute
)

// Config configures a Verifier. At least one of HMACSecret and PublicKeys
// must be set.
type Config struct {
	// HMACSecret enables HS256 tokens signed with this secret.
	HMACSecret string `yaml:"hmac_secret" help:"HS256 secret, 32+ bytes (empty: no HS256)"`
	// PublicKeys are PEM files holding RSA (RS256) or EC P-256 (ES256)
	// public keys ("PUBLIC KEY", "RSA PUBLIC KEY" or "CERTIFICATE" blocks).
	// Several files, or several blocks in one file, are all accepted, so a
	// new key can be added before the old one is retired.
	PublicKeys []string `yaml:"public_keys" help:"PEM files of RSA (RS256) or EC P-256 (ES256) public keys; several for rotation"`
	// Issuer, when set, is required in the "iss" claim.
	Issuer string `yaml:"issuer" help:"required iss claim (empty: not checked)"`
	// Audience, when set, must be one of the "aud" claim's values.
	Audience string `yaml:"audience" help:"required aud value (empty: not checked)"`
	// Leeway is the clock skew tolerated on exp and nbf.
	Leeway time.Duration `yaml:"leeway" help:"clock skew tolerated on exp and nbf (at most 5m)"`
}

// Section is Config as the "auth" section of a binary's configuration: the
// same keys, but no Validate method, because a binary whose roles run with
// auth off leaves it empty. The binary checks it with Require when a role
// has auth on, and builds the Verifier with New(Config(section)).
type Section Config

// Require validates s as a Config, naming fields under "auth."
// ("auth.hmac_secret").
func (s Section) Require() error {
	c := Config(s)
	if err := c.Validate(); err != nil {
		var fe *config.FieldError
		if errors.As(err, &fe) {
			return &config.FieldError{Field: "auth." + fe.Field, Message: fe.Message}
		}
		return err
	}
	return nil
}

// Validate checks the configuration, reading and parsing every public key
// file so that a bad file stops the process at start with its name. Errors
// are config field errors naming the field (hmac_secret, public_keys, ...).
func (c *Config) Validate() error {
	if err := c.check(); err != nil {
		return err
	}
	_, err := loadKeys(c.PublicKeys)
	return err
}

// check validates everything but the key files.
func (c *Config) check() error {
	if c.HMACSecret == "" && len(c.PublicKeys) == 0 {
		return config.Invalid("hmac_secret", "set hmac_secret or public_keys (or both)")
	}
	if c.HMACSecret != "" && len(c.HMACSecret) < MinHMACSecret {
		return config.Invalid("hmac_secret", "must be at least %d bytes, got %d", MinHMACSecret, len(c.HMACSecret))
	}
	if c.Leeway < 0 || c.Leeway > MaxLeeway {
		return config.Invalid("leeway", "must be between 0 and %v, got %v", MaxLeeway, c.Leeway)
	}
	return nil
}

// keySet is the parsed public keys, split by the one algorithm each may
// verify.
type keySet struct {
	rsa []any // *rsa.PublicKey, for RS256
	ec  []any // *ecdsa.PublicKey on P-256, for ES256
}

// loadKeys reads every PEM file of paths. Errors name the field and the
// file.
func loadKeys(paths []string) (keySet, error) {
	var ks keySet
	for i, path := range paths {
		field := fmt.Sprintf("public_keys[%d]", i)
		if path == "" {
			return ks, config.Invalid(field, "empty path")
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return ks, config.Invalid(field, "%v", err)
		}
		if err := ks.addPEM(b); err != nil {
			return ks, config.Invalid(field, "%s: %v", path, err)
		}
	}
	return ks, nil
}

// addPEM adds every public key block of b; a file with none, or with a
// private key, is an error.
func (ks *keySet) addPEM(b []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		key, err := parsePublicBlock(block)
		if err != nil {
			return err
		}
		switch k := key.(type) {
		case *rsa.PublicKey:
			if k.N.BitLen() < MinRSABits {
				return fmt.Errorf("RSA key of %d bits, need at least %d", k.N.BitLen(), MinRSABits)
			}
			ks.rsa = append(ks.rsa, k)
		case *ecdsa.PublicKey:
			if k.Curve != elliptic.P256() {
				return fmt.Errorf("EC key on curve %s, only P-256 (ES256) is accepted", k.Curve.Params().Name)
			}
			ks.ec = append(ks.ec, k)
		default:
			return fmt.Errorf("unsupported public key type %T (use RSA or EC P-256)", key)
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM block found")
	}
	return nil
}

func parsePublicBlock(block *pem.Block) (any, error) {
	switch block.Type {
	case "PUBLIC KEY":
		return x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		return x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		return cert.PublicKey, nil
	case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
		// The verifier never needs it; refusing keeps signing keys off the
		// servers that only verify.
		return nil, fmt.Errorf("holds a %s; give the public key (openssl pkey -pubout)", block.Type)
	}
	return nil, fmt.Errorf("unsupported PEM block %q", block.Type)
}
