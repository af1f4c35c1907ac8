package auth

import (
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/danmaku/danmaku"
)

func TestVerifyValid(t *testing.T) {
	rk := rsaKeys()[0]
	ek := mustECKey(t, elliptic.P256())
	v := mustVerifier(t, Config{
		HMACSecret: string(testSecret),
		PublicKeys: []string{
			writeFile(t, "rsa.pem", pemPublic(t, &rk.PublicKey)),
			writeFile(t, "ec.pem", pemPublic(t, &ek.PublicKey)),
		},
	})
	if got := strings.Join(v.Algorithms(), ","); got != "HS256,RS256,ES256" {
		t.Fatalf("Algorithms = %s", got)
	}
	c := claims()
	c.Name = "alice"
	c.Rooms = &[]string{"live-7", "quiz-*"}
	for _, tc := range []struct {
		name   string
		method jwt.SigningMethod
		key    any
	}{
		{"HS256", jwt.SigningMethodHS256, testSecret},
		{"RS256", jwt.SigningMethodRS256, rk},
		{"ES256", jwt.SigningMethodES256, ek},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(sign(t, tc.method, tc.key, c))
			if err != nil {
				t.Fatal(err)
			}
			if got.UID != 42 || got.Subject() != "42" || got.Name != "alice" {
				t.Fatalf("claims = %+v", got)
			}
			if strings.Join(got.Rooms, ",") != "live-7,quiz-*" {
				t.Fatalf("rooms = %q", got.Rooms)
			}
			if !got.ExpiresAt.Equal(c.ExpiresAt.Time) {
				t.Fatalf("exp = %v, want %v", got.ExpiresAt, c.ExpiresAt.Time)
			}
		})
	}
}

// wantUnauth checks that err is an EUNAUTH danmaku.Error whose message
// contains want and nothing of token.
func wantUnauth(t *testing.T, err error, want, token string) {
	t.Helper()
	var de *danmaku.Error
	if !errors.As(err, &de) || de.Code != danmaku.EUNAUTH || de.Field != "token" {
		t.Fatalf("err = %v, want an EUNAUTH error on field token", err)
	}
	if !strings.Contains(de.Message, want) {
		t.Fatalf("message %q does not say %q", de.Message, want)
	}
	for _, part := range strings.Split(token, ".") {
		if len(part) >= 8 && strings.Contains(err.Error(), part) {
			t.Fatalf("error %q echoes the token", err)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	rk, other := rsaKeys()[0], rsaKeys()[1]
	rsaPEM := pemPublic(t, &rk.PublicKey)
	ek := mustECKey(t, elliptic.P256())
	rsaOnly := mustVerifier(t, Config{PublicKeys: []string{writeFile(t, "rsa.pem", rsaPEM)}})
	both := mustVerifier(t, Config{HMACSecret: string(testSecret), PublicKeys: []string{writeFile(t, "rsa.pem", rsaPEM)}})
	hsOnly := mustVerifier(t, Config{HMACSecret: string(testSecret)})

	with := func(f func(c *wireClaims)) *wireClaims { c := claims(); f(c); return c }
	hs := func(c jwt.Claims) string { return sign(t, jwt.SigningMethodHS256, testSecret, c) }
	good := hs(claims())
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + b64(`{"sub":"1","exp":4102444800}`) + "." + parts[2]
	none := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims())

	cases := []struct {
		name  string
		v     *Verifier
		token string
		want  string
	}{
		{"empty", hsOnly, "", "missing token"},
		{"too long", hsOnly, strings.Repeat("a", MaxTokenLen+1), "longer than"},
		{"malformed", hsOnly, "not.a-token", "malformed"},
		{"expired", hsOnly, hs(with(func(c *wireClaims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute)) })), "expired"},
		{"not yet valid", hsOnly, hs(with(func(c *wireClaims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour)) })), "not valid yet"},
		{"missing exp", hsOnly, hs(with(func(c *wireClaims) { c.ExpiresAt = nil })), "missing exp"},
		{"alg none", both, none, "wrong algorithm"},
		{"alg none unsigned", both, b64(`{"alg":"none"}`) + "." + parts[1] + ".", "wrong algorithm"},
		// HS256 "signed" with the RSA public key's bytes as the secret.
		{"HS/RS confusion, RSA only", rsaOnly, sign(t, jwt.SigningMethodHS256, rsaPEM, claims()), "wrong algorithm"},
		{"HS/RS confusion, RSA and HMAC", both, sign(t, jwt.SigningMethodHS256, rsaPEM, claims()), "bad signature"},
		{"RS384 with an RSA key", rsaOnly, sign(t, jwt.SigningMethodRS384, rk, claims()), "wrong algorithm"},
		{"PS256 with an RSA key", rsaOnly, sign(t, jwt.SigningMethodPS256, rk, claims()), "wrong algorithm"},
		{"ES256 without EC keys", both, sign(t, jwt.SigningMethodES256, ek, claims()), "wrong algorithm"},
		{"unknown alg", hsOnly, b64(`{"alg":"XY512"}`) + "." + parts[1] + "." + parts[2], "wrong algorithm"},
		{"wrong RSA key", rsaOnly, sign(t, jwt.SigningMethodRS256, other, claims()), "bad signature"},
		{"wrong HMAC secret", hsOnly, sign(t, jwt.SigningMethodHS256, []byte("another-secret-of-32-bytes......"), claims()), "bad signature"},
		{"tampered payload", hsOnly, tampered, "bad signature"},
		{"tampered RS256 payload", rsaOnly, retarget(sign(t, jwt.SigningMethodRS256, rk, claims()), `{"sub":"1","exp":4102444800}`), "bad signature"},
		{"missing sub", hsOnly, hs(with(func(c *wireClaims) { c.Subject = "" })), "missing sub"},
		{"sub zero", hsOnly, hs(with(func(c *wireClaims) { c.Subject = "0" })), "bad sub"},
		{"sub negative", hsOnly, hs(with(func(c *wireClaims) { c.Subject = "-4" })), "bad sub"},
		{"sub leading zero", hsOnly, hs(with(func(c *wireClaims) { c.Subject = "042" })), "bad sub"},
		{"sub not a number", hsOnly, hs(with(func(c *wireClaims) { c.Subject = "admin" })), "bad sub"},
		{"sub overflow", hsOnly, hs(with(func(c *wireClaims) { c.Subject = "99999999999999999999" })), "bad sub"},
		{"sub as JSON number", hsOnly, hs(jwt.MapClaims{"sub": 42, "exp": 4102444800}), `"sub" has the wrong JSON type`},
		{"rooms as a string", hsOnly, hs(jwt.MapClaims{"sub": "42", "exp": 4102444800, "rooms": "live"}), `"rooms" has the wrong JSON type`},
		{"bad room entry", hsOnly, hs(with(func(c *wireClaims) { c.Rooms = &[]string{"ok", "bad room"} })), "bad rooms: entry 1"},
		{"star inside a room", hsOnly, hs(with(func(c *wireClaims) { c.Rooms = &[]string{"a*b"} })), "bad rooms"},
		{"too many rooms", hsOnly, hs(with(func(c *wireClaims) { r := make([]string, MaxRooms+1); c.Rooms = &r })), "more than"},
		{"roles as a string", hsOnly, hs(jwt.MapClaims{"sub": "42", "exp": 4102444800, "roles": "moderator"}), `"roles" has the wrong JSON type`},
		{"bad role entry", hsOnly, hs(with(func(c *wireClaims) { c.Roles = []string{"member", "Mod erator"} })), "bad roles: entry 1"},
		{"empty role", hsOnly, hs(with(func(c *wireClaims) { c.Roles = []string{""} })), "bad roles: entry 0"},
		{"too many roles", hsOnly, hs(with(func(c *wireClaims) { c.Roles = make([]string, MaxRoles+1) })), "bad roles: more than"},
		{"negative density", hsOnly, hs(jwt.MapClaims{"sub": "42", "exp": 4102444800, "density": -1}), "bad density"},
		{"density as a string", hsOnly, hs(jwt.MapClaims{"sub": "42", "exp": 4102444800, "density": "all"}), `"density" has the wrong JSON type`},
		{"control in name", hsOnly, hs(with(func(c *wireClaims) { c.Name = "a\x1bb" })), "bad name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.v.Verify(tc.token)
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			wantUnauth(t, err, tc.want, tc.token)
		})
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// retarget swaps token's payload for payload, keeping header and signature.
func retarget(token, payload string) string {
	p := strings.Split(token, ".")
	return p[0] + "." + b64(payload) + "." + p[2]
}

func TestIssuerAudienceLeeway(t *testing.T) {
	v := mustVerifier(t, Config{HMACSecret: string(testSecret), Issuer: "app", Audience: "danmaku", Leeway: 30 * time.Second})
	base := Claims{UID: 7, Issuer: "app", Audience: []string{"other", "danmaku"}, ExpiresAt: time.Now().Add(-10 * time.Second)}
	mint := func(f func(c *Claims)) string {
		c := base
		f(&c)
		tok, err := Mint(testSecret, c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// Expired 10 s ago is inside the 30 s leeway.
	if c, err := v.Verify(mint(func(*Claims) {})); err != nil || c.UID != 7 || c.Issuer != "app" {
		t.Fatalf("within leeway: %+v, %v", c, err)
	}
	for _, tc := range []struct {
		name, want string
		f          func(c *Claims)
	}{
		{"past leeway", "expired", func(c *Claims) { c.ExpiresAt = time.Now().Add(-time.Minute) }},
		{"wrong issuer", "wrong issuer", func(c *Claims) { c.Issuer = "evil" }},
		{"missing issuer", "missing iss", func(c *Claims) { c.Issuer = "" }},
		{"wrong audience", "wrong audience", func(c *Claims) { c.Audience = []string{"other"} }},
		{"missing audience", "missing aud", func(c *Claims) { c.Audience = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := mint(tc.f)
			_, err := v.Verify(tok)
			wantUnauth(t, err, tc.want, tok)
		})
	}
}

func TestAllowsRoom(t *testing.T) {
	cases := []struct {
		name  string
		rooms []string
		room  string
		want  bool
	}{
		{"no rooms claim allows any room", nil, "anything", true},
		{"empty rooms claim allows none", []string{}, "live", false},
		{"exact", []string{"live-7"}, "live-7", true},
		{"exact is not a prefix", []string{"live-7"}, "live-70", false},
		{"prefix", []string{"quiz-*"}, "quiz-1", true},
		{"prefix matches itself", []string{"quiz-*"}, "quiz-", true},
		{"prefix not matching", []string{"quiz-*"}, "quiz", false},
		{"star alone", []string{"*"}, "anything", true},
		{"second entry", []string{"a", "b-*"}, "b-2", true},
		{"not allowed", []string{"a", "b-*"}, "c", false},
	}
	v := mustVerifier(t, Config{HMACSecret: string(testSecret)})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Through a token, so absent and empty survive the round trip.
			tok, err := Mint(testSecret, Claims{UID: 1, Rooms: tc.rooms, ExpiresAt: time.Now().Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			c, err := v.Verify(tok)
			if err != nil {
				t.Fatal(err)
			}
			if (c.Rooms == nil) != (tc.rooms == nil) {
				t.Fatalf("rooms = %#v, minted %#v", c.Rooms, tc.rooms)
			}
			if got := c.AllowsRoom(tc.room); got != tc.want {
				t.Fatalf("AllowsRoom(%q) with %q = %v", tc.room, tc.rooms, got)
			}
		})
	}
}

func TestKeyRotation(t *testing.T) {
	oldKey, newKey := rsaKeys()[0], rsaKeys()[1]
	oldPath := writeFile(t, "old.pem", pemPublic(t, &oldKey.PublicKey))
	newPath := writeFile(t, "new.pem", pemPublic(t, &newKey.PublicKey))
	oldTok := sign(t, jwt.SigningMethodRS256, oldKey, claims())
	newTok := sign(t, jwt.SigningMethodRS256, newKey, claims())

	during := mustVerifier(t, Config{PublicKeys: []string{oldPath, newPath}})
	for name, tok := range map[string]string{"old": oldTok, "new": newTok} {
		if _, err := during.Verify(tok); err != nil {
			t.Fatalf("%s key during rotation: %v", name, err)
		}
	}
	after := mustVerifier(t, Config{PublicKeys: []string{newPath}})
	if _, err := after.Verify(newTok); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
	_, err := after.Verify(oldTok)
	wantUnauth(t, err, "bad signature", oldTok)
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"":                 "",
		"Bearer abc.def.g": "abc.def.g",
		"bearer  abc ":     "abc",
		"Basic dXNlcg==":   "",
		"Bearer":           "",
	} {
		r := httptest.NewRequest("GET", "/ws", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if got := BearerToken(r); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", header, got, want)
		}
	}
}

func TestMintRejects(t *testing.T) {
	exp := time.Now().Add(time.Minute)
	for _, tc := range []struct {
		name, field string
		secret      []byte
		c           Claims
	}{
		{"short secret", "secret", []byte("short"), Claims{UID: 1, ExpiresAt: exp}},
		{"no uid", "uid", testSecret, Claims{ExpiresAt: exp}},
		{"no exp", "exp", testSecret, Claims{UID: 1}},
		{"bad room", "rooms", testSecret, Claims{UID: 1, ExpiresAt: exp, Rooms: []string{"a b"}}},
		{"bad role", "roles", testSecret, Claims{UID: 1, ExpiresAt: exp, Roles: []string{"Admin!"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Mint(tc.secret, tc.c)
			if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != tc.field {
				t.Fatalf("err = %v, want EINVALID on %s", err, tc.field)
			}
		})
	}
}

// TestRoles: the roles claim is read from a token, written by Mint and
// asked with HasRole; a token without it grants no role.
func TestRoles(t *testing.T) {
	v := mustVerifier(t, Config{HMACSecret: string(testSecret)})
	exp := time.Now().Add(time.Hour)
	tok, err := Mint(testSecret, Claims{UID: 7, ExpiresAt: exp, Roles: []string{RoleModerator, "vip"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasRole(RoleModerator) || !c.HasRole("vip") || c.HasRole(RolePriority) || c.HasRole(RoleMember) {
		t.Fatalf("roles = %q", c.Roles)
	}
	// A token from another issuer's library, the claim written by hand.
	c, err = v.Verify(sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "8", "exp": exp.Unix(), "roles": []string{RolePriority, RoleMember}}))
	if err != nil || !c.HasRole(RolePriority) || !c.HasRole(RoleMember) || c.HasRole(RoleModerator) {
		t.Fatalf("roles = %q (%v)", c.Roles, err)
	}
	tok, err = Mint(testSecret, Claims{UID: 9, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	if parts := strings.Split(tok, "."); strings.Contains(string(mustB64(t, parts[1])), "roles") {
		t.Fatalf("a token without roles carries the claim: %s", mustB64(t, parts[1]))
	}
	if c, err = v.Verify(tok); err != nil || c.Roles != nil || c.HasRole(RoleModerator) {
		t.Fatalf("roles = %q (%v)", c.Roles, err)
	}
}

func mustB64(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
