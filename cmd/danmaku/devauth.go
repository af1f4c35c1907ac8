package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/httpx"
)

// devTokenPath is the development token endpoint of this binary.
const devTokenPath = "/dev/token"

// devTokenTTL is the lifetime of a development token.
const devTokenTTL = 12 * time.Hour

// devAuth gives the auth section a random HMAC secret when a door has auth
// on and the section names no key, so "-logic.auth=jwt -comet.auth=jwt"
// alone runs the demo with tokens. It reports whether it did: only then
// is the development token endpoint served, never with a configured
// secret or key, which role binaries may share.
func (m *Main) devAuth() bool {
	c := &m.Config
	if !c.authOn() || c.Auth.HMACSecret != "" || len(c.Auth.PublicKeys) > 0 {
		return false
	}
	var b [32]byte
	rand.Read(b[:])
	c.Auth.HMACSecret = hex.EncodeToString(b[:])
	return true
}

// authVerifier builds the one Verifier both doors share (nil with auth
// off) and says at start-up how the doors are guarded.
func (m *Main) authVerifier(devSecret bool) (*auth.Verifier, error) {
	c := &m.Config
	if !c.authOn() {
		return nil, nil
	}
	v, err := auth.New(auth.Config(c.Auth))
	if err != nil {
		return nil, err
	}
	fields := []zap.Field{zap.String("logic.auth", c.Logic.Auth), zap.String("comet.auth", c.Comet.Auth),
		zap.Strings("algorithms", v.Algorithms())}
	if devSecret {
		m.log.Warn("DEVELOPMENT MODE: auth has no configured key, so this process made a random HS256 secret "+
			"and serves "+devTokenPath+", where anybody can get a token for any user; configure auth.hmac_secret or "+
			"auth.public_keys to turn the endpoint off (production runs the role binaries, which have none)", fields...)
	} else {
		m.log.Info("tokens are checked with the configured auth keys; "+devTokenPath+" is off", fields...)
	}
	return v, nil
}

// devTokenHandler answers GET /dev/token?uid=42&name=Ann with
// {"token":"..."}: an HS256 token for that user and name, valid for any
// room, so the demo page works with auth on. Development only.
func (m *Main) devTokenHandler() http.Handler {
	secret := []byte(m.Config.Auth.HMACSecret)
	maxName := m.Config.Logic.MaxNameRunes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			httpx.WriteError(w, danmaku.Errorf(danmaku.CodeMethod, "method", "use GET"))
			return
		}
		q := r.URL.Query()
		uid, err := strconv.ParseInt(q.Get("uid"), 10, 64)
		if err != nil || uid <= 0 {
			httpx.WriteError(w, danmaku.Errorf(danmaku.EINVALID, "uid", "must be a positive integer"))
			return
		}
		name := q.Get("name")
		if !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxName {
			httpx.WriteError(w, danmaku.Errorf(danmaku.EINVALID, "name", "at most %d characters of valid UTF-8", maxName))
			return
		}
		tok, err := auth.Mint(secret, auth.Claims{UID: uid, Name: name, ExpiresAt: time.Now().Add(devTokenTTL)})
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"token": tok})
	})
}

// Reload re-reads the blocked-word list (SIGHUP); a list that fails to
// load is logged and the old one stays.
func (m *Main) Reload() {
	if m.logic == nil {
		return
	}
	if err := m.logic.ReloadWords(); err != nil {
		m.log.Error("blocked words not reloaded; the previous list stays", zap.Error(err))
	}
}
