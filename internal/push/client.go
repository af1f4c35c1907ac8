// Package push is the wire between job and the comets' internal listener:
// job's client for POST /push and the shapes both sides agree on. It imports
// nothing of the WebSocket side, so the job binary stays free of it.
package push

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/httpx"
)

// Path is the comet's internal push endpoint.
const Path = "/push"

// Response is the body of a successful push.
type Response struct {
	// Delivered is how many viewers the batch was handed to.
	Delivered int `json:"delivered"`
}

// Client is job's client of the comets' internal push endpoint. It keeps
// HTTP/1.1 connections alive per comet, so a push costs one request on a
// warm connection, and bounds every push with a timeout so a slow or dead
// comet costs at most that much. It is safe for concurrent use.
type Client struct {
	secret  string
	timeout time.Duration
	client  *http.Client
}

// NewClient returns a Client authenticating with secret; timeout bounds one
// push (dial, request and answer).
func NewClient(secret string, timeout time.Duration) *Client {
	dialer := &net.Dialer{Timeout: min(timeout, 2*time.Second), KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: dialer.DialContext,
		// Pushes to one comet come from many room goroutines at once; keep
		// enough warm connections that none of them dials on the hot path.
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: 0,
		DisableCompression:    true, // bodies are small and on a private network
		ForceAttemptHTTP2:     false,
		WriteBufferSize:       16 << 10,
		ReadBufferSize:        4 << 10,
	}
	return &Client{secret: secret, timeout: timeout, client: &http.Client{Transport: tr, Timeout: timeout}}
}

// Transport is the client's HTTP transport, for tuning beyond the defaults
// (a benchmark turns keep-alive off with it to price a dial per push).
func (p *Client) Transport() *http.Transport { return p.client.Transport.(*http.Transport) }

// Close drops the idle connections.
func (p *Client) Close() { p.client.CloseIdleConnections() }

// Push sends body, the JSON of a danmaku.Batch, to the comet at addr
// ("host:port" or a URL) and returns the number of viewers it reached.
// Network failures, timeouts and 5xx answers are EUNAVAILABLE errors (try
// again, or another time); a 4xx answer is the comet's error (EINVALID for
// a bad batch, EUNAUTH for a wrong secret) and retrying will not help.
func (p *Client) Push(ctx context.Context, addr string, body []byte) (int, error) {
	url := addr
	if !strings.Contains(addr, "://") {
		url = "http://" + addr
	}
	url = strings.TrimSuffix(url, "/") + Path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, danmaku.Errorf(danmaku.EINVALID, "addr", "bad comet address %q: %v", addr, err)
	}
	req.Header.Set("Authorization", "Bearer "+p.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, danmaku.Unavailable("push to comet "+addr, err)
	}
	defer resp.Body.Close()
	// Read the whole (small) answer so the connection goes back to the pool.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, danmaku.Unavailable("push to comet "+addr, err)
	}
	if resp.StatusCode == http.StatusOK {
		var pr Response
		if err := json.Unmarshal(raw, &pr); err != nil {
			return 0, danmaku.Unavailable("push to comet "+addr, fmt.Errorf("decode answer: %w", err))
		}
		return pr.Delivered, nil
	}
	var eb httpx.ErrorBody
	json.Unmarshal(raw, &eb)
	msg := eb.Error.Message
	if msg == "" {
		msg = strings.TrimSpace(string(raw))
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return 0, danmaku.Unavailable("push to comet "+addr, fmt.Errorf("status %d: %s", resp.StatusCode, msg))
	}
	// The comet's own code survives when it is a domain code; anything
	// else (an HTTP-only code, a proxy's page) is the caller's fault.
	code := eb.Error.Code
	switch code {
	case danmaku.EINVALID, danmaku.ENOTFOUND, danmaku.ECONFLICT, danmaku.EUNAUTH:
	default:
		code = danmaku.EINVALID
	}
	return 0, &danmaku.Error{Code: code, Field: eb.Error.Field, Message: fmt.Sprintf("comet %s: %s", addr, msg)}
}
