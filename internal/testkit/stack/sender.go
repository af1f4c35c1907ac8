package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// maxPerRequest is logic.max_messages: the most messages one send may
// carry.
const maxPerRequest = 50

var (
	httpClient = &http.Client{Timeout: 5 * time.Second}
	senderUID  atomic.Int64
)

// post sends n messages to room in one request and returns their ids
// when logic accepted them (202). It tries once: a refusal is the
// Sender's to record.
func (s *Stack) post(room, prefix string, n int) ([]string, error) {
	contents := make([]string, n)
	for i := range contents {
		contents[i] = fmt.Sprintf("%s %d", prefix, i)
	}
	ids, _, err := postOnce(s.LogicURL, room, 1000+senderUID.Add(1), "stack", contents, nil)
	return ids, err
}

// retryFor bounds how long Post retries a send logic answered 503.
const retryFor = 15 * time.Second

// Post sends contents to room through logic at logicURL in one
// /logic/send request as user uid, and returns the message ids when logic
// accepted them all (202). Like the clients docs/protocol.md describes, it
// sends each message with a msgId and repeats the request with the same
// msgIds while logic answers 503 (Redis or Kafka did not answer in time;
// nothing was accepted, or what was is not accepted twice), for up to
// retryFor; any other refusal is returned at once. It needs no test
// goroutine.
func Post(logicURL, room string, uid int64, name string, contents []string) ([]string, error) {
	keys := make([]string, len(contents))
	for i := range keys {
		keys[i] = fmt.Sprintf("t%x-%d-%d", keyPrefix, postKey.Add(1), i)
	}
	deadline := time.Now().Add(retryFor)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		ids, status, err := postOnce(logicURL, room, uid, name, contents, keys)
		if status != http.StatusServiceUnavailable || time.Now().Add(wait).After(deadline) {
			return ids, err
		}
		time.Sleep(wait)
	}
}

// postKey and keyPrefix make Post's msgIds unique within a process and,
// against a Redis shared by several test processes, between them.
var (
	postKey   atomic.Int64
	keyPrefix = time.Now().UnixNano() & 0xffffffffff
)

// postOnce sends one /logic/send request; msgIDs, when not nil, gives each
// message its idempotency key. It returns logic's status (0 when no
// answer came).
func postOnce(logicURL, room string, uid int64, name string, contents, msgIDs []string) ([]string, int, error) {
	type msg struct {
		Content string `json:"content"`
		MsgID   string `json:"msgId,omitempty"`
	}
	req := struct {
		RoomID   string `json:"roomId"`
		UserID   int64  `json:"userId"`
		UserName string `json:"userName"`
		Messages []msg  `json:"messages"`
	}{RoomID: room, UserID: uid, UserName: name}
	for i, c := range contents {
		m := msg{Content: c}
		if msgIDs != nil {
			m.MsgID = msgIDs[i]
		}
		req.Messages = append(req.Messages, m)
	}
	body, _ := json.Marshal(req)
	resp, err := httpClient.Post(logicURL+"/logic/send", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return nil, resp.StatusCode, fmt.Errorf("send: %d %s", resp.StatusCode, b)
	}
	var r struct {
		MsgIDs []string `json:"msgIds"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.MsgIDs) != len(contents) {
		return nil, resp.StatusCode, fmt.Errorf("send answer %s: want %d ids (%v)", b, len(contents), err)
	}
	return r.MsgIDs, resp.StatusCode, nil
}

// Sent is one message logic accepted.
type Sent struct {
	ID string
	At time.Time // when its request was sent
}

// Sender posts messages to one room at a steady rate and records the ids
// logic accepted. A refused request (Redis or Kafka down) is recorded
// (RefusedAt) and its messages are not accepted; the sender goes on.
type Sender struct {
	room string
	done chan struct{}
	stop chan struct{}

	mu         sync.Mutex
	accepted   []Sent
	refusedAt  []time.Time
	refusedErr []error
}

// Send starts posting n messages to room at rate messages a second, in
// requests of up to 50 messages every 20 ms. It stops after n messages,
// on Stop, or when tb ends.
func (s *Stack) Send(tb testing.TB, room string, n int, rate float64) *Sender {
	tb.Helper()
	sd := &Sender{room: room, done: make(chan struct{}), stop: make(chan struct{})}
	go sd.run(s, n, rate)
	tb.Cleanup(func() { sd.Stop() })
	return sd
}

func (sd *Sender) run(s *Stack, n int, rate float64) {
	defer close(sd.done)
	const tick = 20 * time.Millisecond
	start := time.Now()
	for sent := 0; sent < n; {
		// Due by now at the rate; a slow request makes the next one bigger.
		due := min(n, int(rate*time.Since(start).Seconds())+1)
		k := min(due-sent, maxPerRequest)
		if k > 0 {
			at := time.Now()
			ids, err := s.post(sd.room, "msg", k)
			sd.mu.Lock()
			if err != nil {
				sd.refusedAt = append(sd.refusedAt, time.Now())
				sd.refusedErr = append(sd.refusedErr, err)
			} else {
				for _, id := range ids {
					sd.accepted = append(sd.accepted, Sent{ID: id, At: at})
				}
			}
			sd.mu.Unlock()
			sent += k
		}
		select {
		case <-sd.stop:
			return
		case <-time.After(tick):
		}
	}
}

// Stop stops sending and waits for the request in flight.
func (sd *Sender) Stop() {
	select {
	case <-sd.stop:
	default:
		close(sd.stop)
	}
	<-sd.done
}

// Wait waits until every message was posted, failing tb after d.
func (sd *Sender) Wait(tb testing.TB, d time.Duration) {
	tb.Helper()
	select {
	case <-sd.done:
	case <-time.After(d):
		tb.Fatalf("sender to %s not done after %v: %d accepted", sd.room, d, len(sd.Accepted()))
	}
}

// Accepted returns the ids logic accepted so far, in sending order.
func (sd *Sender) Accepted() []string { return sd.AcceptedAfter(time.Time{}) }

// AcceptedAfter returns the accepted ids whose request was sent after t.
func (sd *Sender) AcceptedAfter(t time.Time) []string {
	var ids []string
	for _, m := range sd.SentAfter(t) {
		ids = append(ids, m.ID)
	}
	return ids
}

// SentAfter returns the accepted messages whose request was sent after t,
// with the time it was sent.
func (sd *Sender) SentAfter(t time.Time) []Sent {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	var sent []Sent
	for _, m := range sd.accepted {
		if m.At.After(t) {
			sent = append(sent, m)
		}
	}
	return sent
}

// Refusals returns why each refused request was refused, in order: the
// answer's status and body, or the transport's error.
func (sd *Sender) Refusals() []error {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return append([]error(nil), sd.refusedErr...)
}

// RefusedAt returns when each refused request was answered, in order.
func (sd *Sender) RefusedAt() []time.Time {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return append([]time.Time(nil), sd.refusedAt...)
}
