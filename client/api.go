package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/danmaku/danmaku"
)

// API calls logic's HTTP API (docs/integrate.md). Its zero value is not
// usable: set URL. It is safe for concurrent use.
//
// Calls that fail with 503 unavailable, or without an answer (a refused
// connection, a timeout), are sent again, up to Attempts times in all,
// after a jittered backoff, with the same body: the idempotency keys Send
// and the notice calls put on every message make a retry show once.
type API struct {
	// URL is logic's base URL, e.g. "http://localhost:8090".
	URL string
	// AdminSecret is logic.admin_secret, for the admin routes, PushUser
	// and Broadcast.
	AdminSecret string
	// HTTPClient makes the requests; nil: one with a 10 s timeout per
	// request.
	HTTPClient *http.Client
	// Attempts is how many times a call is made at most; 0 means 3.
	Attempts int
	// RetryWait is the backoff before the first retry, doubled for each
	// next one, with full jitter; 0 means 200 ms.
	RetryWait time.Duration
}

var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

// Send posts req's comments to its room and returns their ids, in order,
// once Kafka acknowledged every one. token is the sender's JWT (with
// logic.auth: jwt the user comes from it); empty sends none, and the
// body's UserID and UserName say who sends. A message without MsgID gets
// a random idempotency key, so the retries of this call are shown once;
// the ids come back namespaced by the user ("u7-<key>").
func (a *API) Send(ctx context.Context, token string, req danmaku.SendRequest) ([]string, error) {
	req.Messages = keyed(req.Messages, func(m *danmaku.SendMessage) *string { return &m.MsgID })
	var out danmaku.SendResponse
	err := a.call(ctx, http.MethodPost, "/logic/send", token, req, &out)
	return out.MsgIDs, err
}

// History reads room's stored messages, oldest first (GET
// /logic/history): with since < 0 the newest limit messages, else the
// oldest after position since; limit 0 is the server's default (50).
func (a *API) History(ctx context.Context, token, room string, since int64, limit int) (danmaku.HistoryResponse, error) {
	q := url.Values{"roomId": {room}}
	if since >= 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out danmaku.HistoryResponse
	err := a.call(ctx, http.MethodGet, "/logic/history?"+q.Encode(), token, nil, &out)
	return out, err
}

// Online returns room's viewer count over all comets (GET /logic/online).
func (a *API) Online(ctx context.Context, token, room string) (int64, error) {
	var out danmaku.OnlineResponse
	err := a.call(ctx, http.MethodGet, "/logic/online?"+url.Values{"roomId": {room}}.Encode(), token, nil, &out)
	return out.Online, err
}

// PushUser sends notices to every connection of user uid (POST
// /logic/push/user) and returns their ids. Needs AdminSecret.
func (a *API) PushUser(ctx context.Context, uid int64, msgs ...danmaku.NoticeMessage) ([]string, error) {
	return a.notice(ctx, "/logic/push/user", danmaku.NoticeRequest{UserID: uid, Messages: msgs})
}

// Broadcast sends notices to every connection (POST /logic/broadcast) and
// returns their ids. Needs AdminSecret.
func (a *API) Broadcast(ctx context.Context, msgs ...danmaku.NoticeMessage) ([]string, error) {
	return a.notice(ctx, "/logic/broadcast", danmaku.NoticeRequest{Messages: msgs})
}

func (a *API) notice(ctx context.Context, path string, req danmaku.NoticeRequest) ([]string, error) {
	req.Messages = keyed(req.Messages, func(m *danmaku.NoticeMessage) *string { return &m.MsgID })
	var out danmaku.SendResponse
	err := a.call(ctx, http.MethodPost, path, a.AdminSecret, req, &out)
	return out.MsgIDs, err
}

// keyed returns a copy of msgs in which every message without an
// idempotency key (*key) has a new one.
func keyed[M any](msgs []M, key func(*M) *string) []M {
	msgs = append([]M(nil), msgs...)
	for i := range msgs {
		if k := key(&msgs[i]); *k == "" {
			*k = NewMsgID()
		}
	}
	return msgs
}

// Mute mutes req.UserID in req.RoomID (empty: everywhere) for
// req.Duration ("10m").
func (a *API) Mute(ctx context.Context, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "mute", req)
}

// Unmute lifts a mute of req.UserID in req.RoomID (empty: everywhere).
func (a *API) Unmute(ctx context.Context, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "unmute", req)
}

// Ban bans req.UserID from req.RoomID for req.Duration: its sockets leave
// the room, its joins and sends are refused.
func (a *API) Ban(ctx context.Context, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "ban", req)
}

// Unban lifts a ban of req.UserID from req.RoomID.
func (a *API) Unban(ctx context.Context, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "unban", req)
}

// Delete deletes the messages req.IDs of req.RoomID: every viewer removes
// them and the history forgets them. None found is a 404 not_found.
func (a *API) Delete(ctx context.Context, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "delete", req)
}

// RoomSettings changes req.RoomID's modes (req.SlowSeconds,
// req.MembersOnly, req.UniqueSeconds; those left nil stay): the answer's
// State is the room's settings after it, which its viewers get as a state
// frame.
func (a *API) RoomSettings(ctx context.Context, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "room", req)
}

// Pin pins a message of req.RoomID (req.IDs: its id) or a text
// (req.Content) for req.Duration, a paid message (req.Amount) longer; it
// replaces the room's pin. The answer's Pin is the pin made.
func (a *API) Pin(ctx context.Context, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "pin", req)
}

// Unpin takes the pin req.IDs[0] of req.RoomID away before its end.
func (a *API) Unpin(ctx context.Context, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "unpin", req)
}

// ReloadWords makes logic read its blocked-word file again.
func (a *API) ReloadWords(ctx context.Context, actor string) (danmaku.AdminResponse, error) {
	return a.admin(ctx, "words/reload", danmaku.AdminRequest{Actor: actor})
}

func (a *API) admin(ctx context.Context, route string, req danmaku.AdminRequest) (danmaku.AdminResponse, error) {
	var out danmaku.AdminResponse
	err := a.call(ctx, http.MethodPost, "/logic/admin/"+route, a.AdminSecret, req, &out)
	return out, err
}

// call makes the request, again while it fails with 503 or no answer,
// and decodes a 2xx answer into out.
func (a *API) call(ctx context.Context, method, path, bearer string, body, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%s: encode: %w", path, err)
		}
	}
	attempts, wait := a.Attempts, a.RetryWait
	if attempts <= 0 {
		attempts = 3
	}
	if wait <= 0 {
		wait = 200 * time.Millisecond
	}
	for n := 1; ; n++ {
		err := a.do(ctx, method, path, bearer, payload, out)
		if n >= attempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(mrand.N(wait<<(n-1)) + wait/2):
		}
	}
}

// retryable tells the errors a retry may cure: 503 and no answer.
func retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status == http.StatusServiceUnavailable
	}
	return err != nil
}

func (a *API) do(ctx context.Context, method, path, bearer string, payload []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(a.URL, "/")+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := a.HTTPClient
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", path, err)
	}
	if resp.StatusCode >= 300 {
		return answerError(resp, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: decode answer: %w", path, err)
	}
	return nil
}

// answerError is the *Error of an error answer.
func answerError(resp *http.Response, body []byte) *Error {
	var eb danmaku.ErrorBody
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Field, e.Message = eb.Error.Code, eb.Error.Field, eb.Error.Message
	} else {
		e.Code, e.Message = danmaku.EINTERNAL, strings.TrimSpace(string(body))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// NewMsgID returns a random idempotency key (20 characters of
// [0-9a-z]): give it to a message before its first send and keep it for
// every retry.
func NewMsgID() string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var b [20]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = digits[int(b[i])%len(digits)]
	}
	return string(b[:])
}
