package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
)

// mintWith runs "danmaku token" with args and returns the token.
func mintWith(t *testing.T, args ...string) string {
	t.Helper()
	var out, errs bytes.Buffer
	if code := tokenVerb(args, &out, &errs); code != 0 {
		t.Fatalf("token %v: exit %d: %s", args, code, errs.String())
	}
	return strings.TrimSpace(out.String())
}

// writeKeyPair writes key's private half (PKCS#8) and public half (PKIX)
// as PEM files and returns their paths.
func writeKeyPair(t *testing.T, name string, key any, pub any) (private, public string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	private, public = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pem")
	os.WriteFile(private, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	os.WriteFile(public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
	return private, public
}

// A token of "danmaku token" passes the servers' verifier with the claims
// asked for: HS256 with the file's hmac_secret (and its issuer and
// audience), RS256 and ES256 with -key when the public half is configured.
func TestTokenVerb(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	file := filepath.Join(t.TempDir(), "logic.yaml")
	os.WriteFile(file, []byte("auth:\n  hmac_secret: "+secret+"\n  issuer: site\n  audience: danmaku\n"), 0o600)
	v, err := auth.New(auth.Config{HMACSecret: secret, Issuer: "site", Audience: "danmaku"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(mintWith(t, "-config", file, "-uid", "42", "-name", "Ann", "-rooms", "lobby,live-*", "-roles", "moderator,priority", "-ttl", "10m"))
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != 42 || c.Name != "Ann" || !slices.Equal(c.Rooms, []string{"lobby", "live-*"}) ||
		!c.HasRole(auth.RoleModerator) || !c.HasRole(auth.RolePriority) || c.HasRole(auth.RoleMember) ||
		time.Until(c.ExpiresAt) > 10*time.Minute || time.Until(c.ExpiresAt) < 9*time.Minute {
		t.Errorf("claims %+v", c)
	}
	if c, err := v.Verify(mintWith(t, "-config", file, "-uid", "7")); err != nil || c.Rooms != nil || c.Roles != nil {
		t.Errorf("a token without -rooms and -roles: %+v %v, want any room and no role", c, err)
	}

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		name     string
		key, pub any
	}{{"RS256", rsaKey, &rsaKey.PublicKey}, {"ES256", ecKey, &ecKey.PublicKey}} {
		private, public := writeKeyPair(t, k.name, k.key, k.pub)
		v, err := auth.New(auth.Config{PublicKeys: []string{public}})
		if err != nil {
			t.Fatal(err)
		}
		tok := mintWith(t, "-key", private, "-uid", "9")
		if c, err := v.Verify(tok); err != nil || c.UID != 9 {
			t.Errorf("%s: %+v %v", k.name, c, err)
		}
	}
}

// Bad arguments are named, with exit status 2.
func TestTokenVerbRefuses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "logic.yaml")
	os.WriteFile(file, []byte("auth:\n  hmac_secret: 0123456789abcdef0123456789abcdef\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(empty, []byte("logic:\n  auth: jwt\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-config", file}, "uid"},
		{[]string{"-config", file, "-uid", "7", "-rooms", "bad room"}, "rooms"},
		{[]string{"-config", file, "-uid", "7", "-roles", "moderator,Bad Role"}, "roles"},
		{[]string{"-config", file, "-uid", "7", "-ttl", "-1h"}, "-ttl"},
		{[]string{"-config", empty, "-uid", "7"}, "hmac_secret"},
		{[]string{"-config", file, "-uid", "7", "-key", file}, "key"},
	} {
		var out, errs bytes.Buffer
		if code := tokenVerb(c.args, &out, &errs); code != 2 || !strings.Contains(errs.String(), c.want) || out.Len() != 0 {
			t.Errorf("token %v: exit %d, stdout %q, stderr %q; want 2 naming %s", c.args, code, out.String(), errs.String(), c.want)
		}
	}
}

// config init writes files whose secrets agree and differ from run to
// run, with auth off when asked.
func TestConfigInit(t *testing.T) {
	read := func(dir string) (logic, job, comet *Config) {
		logic, job, comet = new(Config), new(Config), new(Config)
		for name, c := range map[string]*Config{"logic": logic, "job": job, "comet": comet} {
			path := filepath.Join(dir, name+".yaml")
			if code := configCheck([]string{path}, &bytes.Buffer{}, os.Stderr); code != 0 {
				t.Fatalf("config check %s: %d", name, code)
			}
			// The all-in-one configuration has every section.
			*c = DefaultConfig()
			if err := config.Parse(c, config.Options{Args: []string{"-config", path}, Output: io.Discard}); err != nil {
				t.Fatal(err)
			}
		}
		return logic, job, comet
	}
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, d := range dirs {
		if code := configInit([]string{d}, &bytes.Buffer{}, os.Stderr); code != 0 {
			t.Fatalf("config init: %d", code)
		}
	}
	l, j, c := read(dirs[0])
	if j.Job.PushSecret != c.Comet.Secret || len(c.Comet.Secret) < 16 {
		t.Errorf("job.push_secret %q, comet.secret %q", j.Job.PushSecret, c.Comet.Secret)
	}
	if l.Auth.HMACSecret != c.Auth.HMACSecret || len(l.Auth.HMACSecret) < auth.MinHMACSecret {
		t.Errorf("auth.hmac_secret: logic %q, comet %q", l.Auth.HMACSecret, c.Auth.HMACSecret)
	}
	if l.Logic.Auth != "jwt" || c.Comet.Auth != "jwt" || len(l.Logic.AdminSecret) < 16 {
		t.Errorf("logic.auth %q, comet.auth %q, logic.admin_secret %q", l.Logic.Auth, c.Comet.Auth, l.Logic.AdminSecret)
	}
	l2, _, c2 := read(dirs[1])
	if l2.Auth.HMACSecret == l.Auth.HMACSecret || c2.Comet.Secret == c.Comet.Secret || l2.Logic.AdminSecret == l.Logic.AdminSecret {
		t.Error("two runs of config init wrote the same secrets")
	}
	if fi, err := os.Stat(filepath.Join(dirs[0], "logic.yaml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("logic.yaml: %v %v, want mode 0600", fi.Mode(), err)
	}

	off := t.TempDir()
	if code := configInit([]string{"-auth", "off", off}, &bytes.Buffer{}, os.Stderr); code != 0 {
		t.Fatalf("config init -auth off: %d", code)
	}
	l, _, c = read(off)
	if l.Logic.Auth != "off" || c.Comet.Auth != "off" || l.Auth.HMACSecret != "" {
		t.Errorf("-auth off: logic.auth %q, comet.auth %q, hmac_secret %q", l.Logic.Auth, c.Comet.Auth, l.Auth.HMACSecret)
	}
}

// -h and -help list the verbs before the flags of the service.
func TestHelpListsVerbsFirst(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"-config", "x.yaml", "-h"}} {
		var out bytes.Buffer
		if !help(args, nil, &out) {
			t.Fatalf("%v: not taken as help", args)
		}
		text := out.String()
		knobs := strings.Index(text, "-logic.listen")
		if knobs < 0 {
			t.Fatalf("%v: no knobs in\n%s", args, text)
		}
		for _, verb := range []string{"danmaku token", "danmaku config init", "danmaku config check"} {
			if i := strings.Index(text, verb); i < 0 || i > knobs {
				t.Errorf("%v: %q not listed before the flags", args, verb)
			}
		}
	}
	var out bytes.Buffer
	if help([]string{"-logic.listen", ":0"}, nil, &out) || out.Len() != 0 {
		t.Fatalf("no help asked, printed %q", out.String())
	}
}
