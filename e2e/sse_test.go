package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/client"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

// sseViewer reads GET /sse of one room like danmaku.js over SSE: it keeps
// the room's epoch and last position and, when its stream ends, opens a
// new one on the next comet with since and epoch; with byEventID it opens
// the same URL with the last event id instead, as an EventSource does.
type sseViewer struct {
	room      string
	urls      []string // comets' /sse URLs
	byEventID bool

	mu       sync.Mutex
	stream   string // id of the open stream
	epoch    string
	pos      int64
	had      bool
	seen     map[string]int // id -> times received
	order    []string
	welcomes []danmaku.Welcome
	closes   []danmaku.CloseFrame
	errs     []string
	lastID   string   // the last event id received
	sentIDs  []string // the Last-Event-ID of each stream opened
	quit     chan struct{}
	done     chan struct{}
}

func newSSEViewer(t *testing.T, room string, urls ...string) *sseViewer {
	return startSSEViewer(t, &sseViewer{room: room, urls: urls})
}

func startSSEViewer(t *testing.T, v *sseViewer) *sseViewer {
	v.seen, v.quit, v.done = map[string]int{}, make(chan struct{}), make(chan struct{})
	go v.loop()
	t.Cleanup(func() { close(v.quit); <-v.done })
	return v
}

func (v *sseViewer) loop() {
	defer close(v.done)
	for i := 0; ; i++ {
		v.session(v.urls[i%len(v.urls)])
		select {
		case <-v.quit:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (v *sseViewer) target(base string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	q := url.Values{"room": {v.room}}
	if v.had && !v.byEventID {
		q.Set("since", strconv.FormatInt(v.pos, 10))
		q.Set("epoch", v.epoch)
	}
	return base + "?" + q.Encode()
}

func (v *sseViewer) session(base string) {
	req, _ := http.NewRequest(http.MethodGet, v.target(base), nil)
	if v.byEventID {
		v.mu.Lock()
		if v.lastID != "" {
			req.Header.Set("Last-Event-ID", v.lastID)
		}
		v.sentIDs = append(v.sentIDs, v.lastID)
		v.mu.Unlock()
	}
	stop := make(chan struct{})
	defer close(stop)
	ctxDone := make(chan struct{})
	go func() {
		select {
		case <-v.quit:
		case <-stop:
		}
		close(ctxDone)
	}()
	cancelable := req.WithContext(contextOf(ctxDone))
	resp, err := http.DefaultClient.Do(cancelable)
	if err != nil {
		v.fail(err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		v.fail(fmt.Sprintf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type")))
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if id, ok := bytes.CutPrefix(sc.Bytes(), []byte("id: ")); ok {
			v.mu.Lock()
			v.lastID = string(id)
			v.mu.Unlock()
		}
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if ok {
			v.frame(data)
		}
	}
}

func (v *sseViewer) fail(s string) {
	v.mu.Lock()
	v.errs = append(v.errs, s)
	v.mu.Unlock()
}

func (v *sseViewer) frame(data []byte) {
	var f struct {
		danmaku.Welcome
		ID     string            `json:"id"`
		Code   int               `json:"code"`
		Reason string            `json:"reason"`
		Msgs   []danmaku.Message `json:"msgs"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		v.fail(err.Error())
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch f.Op {
	case danmaku.OpStream:
		v.stream = f.ID
	case danmaku.OpClose:
		v.closes = append(v.closes, danmaku.CloseFrame{Op: f.Op, Code: f.Code, Reason: f.Reason})
	case danmaku.OpWelcome:
		v.welcomes = append(v.welcomes, f.Welcome)
		if !(f.Recovered != nil && *f.Recovered && v.had && v.epoch == f.Epoch) {
			v.epoch, v.pos, v.had = f.Epoch, f.Pos, true
		}
	case danmaku.OpMsgs:
		for _, m := range f.Msgs {
			if v.seen[m.ID] == 0 {
				v.order = append(v.order, m.ID)
			}
			v.seen[m.ID]++
			if f.Welcome.Epoch == v.epoch {
				v.pos = max(v.pos, m.Pos)
			} else {
				v.epoch, v.pos = f.Welcome.Epoch, m.Pos
			}
		}
	}
}

// SSE viewers get what WebSocket viewers get, resume across a comet
// killed with SIGKILL (a new stream on the other comet with since and
// epoch: 0 lost, none received twice) and change rooms through POST
// /sse?stream=ID.
func TestSSEResumesAcrossCometKill(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 2})
	room := testkit.Uniq("sse-")
	sse := func(c *stack.Comet) string { return "http://" + c.Public + "/sse" }
	v := newSSEViewer(t, room, sse(s.Comets[0]), sse(s.Comets[1]))
	sd := v.flowing(t, s)
	s.Comets[0].Kill()
	sd.Wait(t, 60*time.Second)
	accepted := sd.Accepted()
	v.waitAll(t, accepted)
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.welcomes) < 2 || v.welcomes[1].Recovered == nil || !*v.welcomes[1].Recovered {
		t.Errorf("welcomes %+v: want a recovered resume on the second comet", v.welcomes)
	}
	t.Logf("%d accepted, all received once over SSE across the kill; welcomes %d", len(accepted), len(v.welcomes))
}

// flowing waits for v's welcome, starts sending 600 comments to its room
// at 200/s and returns once v received 150 of them.
func (v *sseViewer) flowing(t *testing.T, s *stack.Stack) *stack.Sender {
	t.Helper()
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		if len(v.welcomes) == 0 {
			return fmt.Errorf("no welcome yet (errors %v)", v.errs)
		}
		return nil
	})
	sd := s.Send(t, v.room, 600, 200)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		if len(v.order) < 150 {
			return fmt.Errorf("%d received", len(v.order))
		}
		return nil
	})
	return sd
}

// waitAll waits until v received every id of accepted, and fails t if
// any message came twice.
func (v *sseViewer) waitAll(t *testing.T, accepted []string) {
	t.Helper()
	testkit.SucceedsSoon(t, 30*time.Second, func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		lost := 0
		for _, id := range accepted {
			if v.seen[id] == 0 {
				lost++
			}
		}
		if lost > 0 {
			return fmt.Errorf("lost %d of %d (errors %d, welcomes %d)", lost, len(accepted), len(v.errs), len(v.welcomes))
		}
		return nil
	})
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, n := range v.seen {
		if n > 1 {
			t.Errorf("message %s received %d times", id, n)
		}
	}
}

// A stream's events carry ids naming where it stands. Opened again on
// the same URL with only its room and the last id as Last-Event-ID (what
// a browser's EventSource does by itself) after its comet was killed
// (SIGKILL) and restarted while comments were sent, it resumes as since
// and epoch would: recovered, every comment once. The id resumes every
// room the stream held, a room subscribed over POST included; an id of
// another epoch is answered recovered false; a malformed one is 400.
func TestSSELastEventID(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1})
	c := s.Comets[0]
	base := "http://" + c.Public + "/sse"
	room := testkit.Uniq("sse-id-")
	v := startSSEViewer(t, &sseViewer{room: room, urls: []string{base}, byEventID: true})
	sd := v.flowing(t, s)
	c.Kill()
	time.Sleep(500 * time.Millisecond) // comments go on while the comet is down
	c.Restart(t)
	sd.Wait(t, 60*time.Second)
	accepted := sd.Accepted()
	v.waitAll(t, accepted)
	v.mu.Lock()
	ws, sent := slices.Clone(v.welcomes), slices.Clone(v.sentIDs)
	v.mu.Unlock()
	if len(ws) < 2 || ws[len(ws)-1].Recovered == nil || !*ws[len(ws)-1].Recovered {
		t.Errorf("welcomes %+v: want a recovered resume after the restart", ws)
	}
	if last := sent[len(sent)-1]; len(sent) < 2 || sent[0] != "" || !strings.HasPrefix(last, room+":") {
		t.Errorf("Last-Event-ID of the streams %q: want none, then the room's place", sent)
	}
	t.Logf("%d accepted, all received once across the restart; %d streams, the last with Last-Event-ID %q", len(accepted), len(sent), sent[len(sent)-1])

	// Two rooms, the second subscribed over POST: the id names both, and
	// a stream opened with it alone resumes both.
	other := testkit.Uniq("sse-id2-")
	st := openSSE(t, base+"?room="+room, "")
	sub := `{"op":"sub","room":"` + other + `"}`
	if resp, err := http.Post(base+"?stream="+st.id, "application/json", strings.NewReader(sub)); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("sub: %v %v", resp, err)
	}
	st.until(t, func(id string, f sseFrame) bool { return f.Op == danmaku.OpWelcome && f.Room == other })
	api := &client.API{URL: s.LogicURL}
	sendOne := func(r, text string) string {
		ids, err := api.Send(context.Background(), "", danmaku.SendRequest{RoomID: r, UserID: 8, UserName: "e",
			Messages: []danmaku.SendMessage{{Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		return ids[0]
	}
	sendOne(other, "to the second room")
	lastID := st.until(t, func(id string, f sseFrame) bool { return f.Op == danmaku.OpMsgs && f.Room == other })
	st.close()
	if !strings.HasPrefix(lastID, room+":") || !strings.Contains(lastID, " "+other+":") {
		t.Fatalf("event id %q: want both rooms", lastID)
	}
	again := openSSE(t, base, lastID)
	recovered := map[string]bool{}
	again.until(t, func(id string, f sseFrame) bool {
		if f.Op == danmaku.OpWelcome {
			recovered[f.Room] = f.Recovered != nil && *f.Recovered
		}
		return len(recovered) == 2
	})
	if !recovered[room] || !recovered[other] {
		t.Errorf("resumed by the id alone: recovered %v, want both rooms true", recovered)
	}
	id := sendOne(other, "after the resume")
	again.until(t, func(_ string, f sseFrame) bool {
		if f.Op == danmaku.OpMsgs && len(f.Msgs) > 0 && f.Msgs[0].ID != id {
			t.Errorf("message %s came again after the resume", f.Msgs[0].ID)
		}
		return f.Op == danmaku.OpMsgs && f.Msgs[0].ID == id
	})
	again.close()

	// Another epoch: not recovered, the recent history instead.
	gap := openSSE(t, base, room+":0123456789abcdef:3")
	gap.until(t, func(_ string, f sseFrame) bool {
		if f.Op == danmaku.OpWelcome && (f.Recovered == nil || *f.Recovered) {
			t.Errorf("a resume of another epoch: welcome %+v, want recovered false", f.Welcome)
		}
		return f.Op == danmaku.OpWelcome
	})
	gap.close()

	req, _ := http.NewRequest(http.MethodGet, base, nil)
	req.Header.Set("Last-Event-ID", room+":e:-1")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var eb danmaku.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || eb.Error.Field != "Last-Event-ID" {
		t.Errorf("malformed Last-Event-ID: %d %+v, want 400 naming the header", resp.StatusCode, eb)
	}
}

// sseFrame is any frame of a stream. Code is an error frame's code (a
// string) or a close event's (a number).
type sseFrame struct {
	danmaku.Welcome
	ID   string            `json:"id"`
	Code json.RawMessage   `json:"code"`
	Msgs []danmaku.Message `json:"msgs"`
}

// rawStream is one open stream read event by event.
type rawStream struct {
	id   string // the stream's id, for its ops
	resp *http.Response
	rd   *bufio.Reader
	last string // the last event id
}

func openSSE(t *testing.T, u, lastID string) *rawStream {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	st := &rawStream{resp: resp, rd: bufio.NewReader(resp.Body)}
	t.Cleanup(st.close)
	st.until(t, func(_ string, f sseFrame) bool { st.id = f.ID; return f.Op == danmaku.OpStream })
	return st
}

func (st *rawStream) close() { st.resp.Body.Close() }

// until reads events until done says so, within 10 s, and returns the
// last event id then.
func (st *rawStream) until(t *testing.T, done func(id string, f sseFrame) bool) string {
	t.Helper()
	timer := time.AfterFunc(10*time.Second, st.close)
	defer timer.Stop()
	for {
		line, err := st.rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			st.last = id
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var f sseFrame
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if done(st.last, f) {
			return st.last
		}
	}
}

// The rules of /ws hold for /sse: a refused origin is 403, the
// per-address limit 429, a missing token 401 (comet.auth jwt), each with
// the JSON error body; a stream's ops go to it by its id, and an unknown
// id is 404.
func TestSSERules(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1, Comet: []string{"-comet.max_conns_per_ip", "1"}})
	base := "http://" + s.Comets[0].Public + "/sse"
	get := func(u string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	code := func(resp *http.Response) string {
		defer resp.Body.Close()
		var eb danmaku.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		return fmt.Sprintf("%d %s", resp.StatusCode, eb.Error.Code)
	}
	if got := code(get(base+"?room=r1", map[string]string{"Origin": "http://evil.example"})); got != "403 permission_denied" {
		t.Errorf("foreign origin: %s", got)
	}
	open := get(base+"?room=r1", nil)
	defer open.Body.Close()
	rd := bufio.NewReader(open.Body)
	line, _ := rd.ReadString('\n')
	var sf danmaku.StreamFrame
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "data: ")), &sf); err != nil || sf.Op != "stream" || len(sf.ID) != 32 {
		t.Fatalf("first event %q: %v", line, err)
	}
	if got := code(get(base+"?room=r1", nil)); got != "429 rate_limited" {
		t.Errorf("second stream from one address with max_conns_per_ip 1: %s", got)
	}
	post := func(stream, body string) string {
		resp, err := http.Post(base+"?stream="+stream, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return code(resp)
	}
	if got := post("nope", `{"op":"ping"}`); got != "404 not_found" {
		t.Errorf("op to an unknown stream: %s", got)
	}
	if got := post(sf.ID, `{"op":"sub","room":"r2"}`); got != "202 " {
		t.Errorf("sub: %s", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"op":"welcome"`) && strings.Contains(line, `"room":"r2"`) {
			return
		}
	}
	t.Error("no welcome of r2 after the posted sub")
}

// contextOf is a context done when done is closed.
func contextOf(done <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-done; cancel() }()
	return ctx
}

// With comet.auth jwt a stream needs a token, as a WebSocket does: none is
// 401 before the stream starts, a valid one opens it.
func TestSSEAuth(t *testing.T) {
	const secret = "sse-test-hmac-secret-0123456789abcdef"
	s := stack.New(t, stack.Options{Comets: 1, NoWarmUp: true, Comet: []string{"-comet.auth", "jwt"},
		CometEnv: []string{"DANMAKU_AUTH_HMAC_SECRET=" + secret}})
	base := "http://" + s.Comets[0].Public + "/sse?room=r1"
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	var eb danmaku.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || eb.Error.Code != danmaku.EUNAUTH {
		t.Errorf("no token: %d %+v, want 401 unauthenticated", resp.StatusCode, eb)
	}
	tok, err := client.Token{UID: 7, Rooms: []string{"r1"}}.HS256([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	resp, err = hc.Get(base + "&token=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for i := 0; i < 6; i++ { // the stream event, its blank line, the welcome's id and data
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream with a token (status %d): %v", resp.StatusCode, err)
		}
		if strings.Contains(line, `"op":"welcome"`) {
			return
		}
	}
	t.Errorf("no welcome on the stream with a token (status %d)", resp.StatusCode)
}

// A comet that shuts down (SIGTERM) ends its SSE streams at once with the
// close event 1001, as it closes its WebSocket viewers: a stream is a
// request in progress, which the HTTP server's shutdown would otherwise
// wait for until its timeout.
func TestSSEShutdown(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1, NoWarmUp: true})
	st := openSSE(t, "http://"+s.Comets[0].Public+"/sse?room=r1", "")
	st.until(t, func(_ string, f sseFrame) bool { return f.Op == danmaku.OpWelcome })
	start := time.Now()
	stopped := make(chan struct{})
	go func() { defer close(stopped); s.Comets[0].Stop(t) }()
	var code string
	st.until(t, func(_ string, f sseFrame) bool { code = string(f.Code); return f.Op == danmaku.OpClose })
	took := time.Since(start)
	<-stopped
	if code != "1001" || took > 5*time.Second {
		t.Errorf("close event %s after %v, want 1001 at once", code, took)
	}
}
