package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Socket senders (-send-socket): each message goes as a send frame on a
// viewer's WebSocket to a comet that takes them (comet.socket_send), and
// counts as accepted on its ack, as a POST counts on 202. A sender holds
// one socket per concurrent send, dialled with a numeric uid (the comet's
// auth off) and no room, so it receives nothing but its answers; a send
// waits for its answer before the socket is used again, as a keep-alive
// connection waits for its response.

// sockPool hands out sockets to CometWS, dialling more on demand; a socket
// that failed is dropped.
type sockPool struct {
	url   string
	users int
	mu    sync.Mutex
	idle  []*sendSock
	made  int
}

// sendSock is one sender socket and the ref of its last send.
type sendSock struct {
	ws  *websocket.Conn
	ref int64
}

func (p *sockPool) get(ctx context.Context) (*sendSock, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	p.made++
	uid := 1 + (p.made-1)%p.users
	p.mu.Unlock()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.DialContext(ctx, p.url+"?uid="+strconv.Itoa(uid), nil)
	if err != nil {
		return nil, err
	}
	return &sendSock{ws: ws}, nil
}

func (p *sockPool) put(s *sendSock) {
	p.mu.Lock()
	p.idle = append(p.idle, s)
	p.mu.Unlock()
}

// sendAnswer is the part of an ack or error frame a sender reads.
type sendAnswer struct {
	Op   string `json:"op"`
	Ref  int64  `json:"ref"`
	Code string `json:"code"`
}

// sockStatus is the HTTP status of a refused send's code, for the report's
// rejectedByStatus.
func sockStatus(code string) int {
	switch code {
	case "rate_limited", "slow_mode":
		return http.StatusTooManyRequests
	case "unavailable":
		return http.StatusServiceUnavailable
	case "invalid_argument", "content_blocked":
		return http.StatusBadRequest
	}
	return http.StatusForbidden
}

// postSocket sends body's room and messages (a /logic/send body) as one
// send frame and returns the status the answer stands for (202: ack).
func (s *sender) postSocket(ctx context.Context, room string, msgs []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()
	sk, err := s.socks.get(ctx)
	if err != nil {
		return 0, err
	}
	sk.ref++
	var frame bytes.Buffer
	frame.WriteString(`{"op":"send","room":"`)
	frame.WriteString(room)
	frame.WriteString(`","msgs":`)
	frame.Write(msgs)
	frame.WriteString(`,"ref":`)
	frame.WriteString(strconv.FormatInt(sk.ref, 10))
	frame.WriteByte('}')
	deadline, _ := ctx.Deadline()
	sk.ws.SetWriteDeadline(deadline)
	sk.ws.SetReadDeadline(deadline)
	if err := sk.ws.WriteMessage(websocket.TextMessage, frame.Bytes()); err != nil {
		sk.ws.Close()
		return 0, err
	}
	for {
		_, data, err := sk.ws.ReadMessage()
		if err != nil {
			sk.ws.Close()
			if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				return 0, context.DeadlineExceeded
			}
			return 0, err
		}
		var a sendAnswer
		if json.Unmarshal(data, &a) != nil || a.Ref != sk.ref {
			continue
		}
		s.socks.put(sk)
		if a.Op == "ack" {
			return http.StatusAccepted, nil
		}
		return sockStatus(a.Code), nil
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
