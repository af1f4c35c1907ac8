package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/client"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

// record collects a viewer's events until it closes.
type record struct {
	mu     sync.Mutex
	events []client.Event
	done   chan struct{}
}

func collect(v *client.Viewer) *record {
	r := &record{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range v.Events() {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *record) of(kind client.Kind) []client.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []client.Event
	for _, ev := range r.events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// delivered is every message id delivered, in order, repeats included.
func (r *record) delivered() []string {
	var ids []string
	for _, ev := range r.of(client.Messages) {
		for _, m := range ev.Msgs {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

func newViewer(t *testing.T, cfg client.ViewerConfig) (*client.Viewer, *record) {
	t.Helper()
	v, err := client.NewViewer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := collect(v)
	t.Cleanup(func() { v.Close(); <-r.done })
	return v, r
}

// waitDelivered waits until r holds at least n delivered messages.
func waitDelivered(t *testing.T, r *record, n int) {
	t.Helper()
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if got := len(r.delivered()); got < n {
			return fmt.Errorf("%d delivered, want %d", got, n)
		}
		return nil
	})
}

func waitKind(t *testing.T, r *record, kind client.Kind, n int) []client.Event {
	t.Helper()
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		if got := len(r.of(kind)); got < n {
			return errors.New("waiting for " + string(kind))
		}
		return nil
	})
	return r.of(kind)
}

// A viewer of the SDK on a comet that is killed (SIGKILL, no close frame)
// while messages flow reconnects to the next comet of its list, resumes
// from its position and delivers every accepted message exactly once,
// with no gap reported: over WebSockets, and over SSE streams.
func TestViewerResumesAcrossCometKill(t *testing.T) {
	for _, tr := range []string{client.TransportWebSocket, client.TransportSSE} {
		t.Run(tr, func(t *testing.T) { resumesAcrossCometKill(t, tr) })
	}
}

func resumesAcrossCometKill(t *testing.T, transport string) {
	s := stack.New(t, stack.Options{Comets: 2})
	room := testkit.Uniq("sdk-kill-")
	v, r := newViewer(t, client.ViewerConfig{URLs: []string{s.Comets[0].WS(), s.Comets[1].WS()}, Rooms: []string{room},
		BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second, Transport: transport})
	waitKind(t, r, client.Welcome, 1)
	sd := s.Send(t, room, 800, 200)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if len(r.delivered()) < 200 {
			return errors.New("waiting for 200 messages before the kill")
		}
		return nil
	})
	s.Comets[0].Kill()
	sd.Wait(t, 60*time.Second)
	accepted := sd.Accepted()
	if len(accepted) < 700 {
		t.Fatalf("only %d of 800 accepted (refused at %v)", len(accepted), sd.RefusedAt())
	}
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		got := map[string]bool{}
		for _, id := range r.delivered() {
			got[id] = true
		}
		var lost int
		for _, id := range accepted {
			if !got[id] {
				lost++
			}
		}
		if lost > 0 {
			return fmt.Errorf("lost %d of %d", lost, len(accepted))
		}
		return nil
	})
	ids := r.delivered()
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("message %s delivered twice", id)
		}
		seen[id] = true
	}
	if gaps := r.of(client.Gap); len(gaps) > 0 {
		t.Errorf("gaps reported: %+v", *gaps[0].Gap)
	}
	ws := r.of(client.Welcome)
	if len(ws) < 2 {
		t.Fatalf("%d welcomes: the viewer did not reconnect", len(ws))
	}
	if w := ws[1].Welcome; w.Recovered == nil || !*w.Recovered {
		t.Errorf("the resume on the second comet was not recovered: %+v", w)
	}
	want := s.Comets[1].WS()
	if transport == client.TransportSSE {
		want = "http://" + s.Comets[1].Public + "/sse"
	}
	if c := r.of(client.Connected); c[len(c)-1].URL != want || v.Transport() != transport {
		t.Errorf("reconnected to %s over %s, want the other comet %s over %s", c[len(c)-1].URL, v.Transport(), want, transport)
	}
	if _, pos, _ := v.Position(room); pos < int64(len(accepted)) {
		t.Errorf("position %d after %d messages", pos, len(accepted))
	}
	t.Logf("%d accepted, %d delivered once, 0 lost, 0 twice, %d welcomes", len(accepted), len(ids), len(ws))
}

// A send whose answer is lost after Kafka took it (here: a proxy in front
// of logic answers 503 to the first attempt) is sent again with the same
// idempotency keys: the retry gets the same ids and a viewer shows each
// message once.
func TestSendRetryKeepsIDs(t *testing.T) {
	exampleStack()
	target, _ := url.Parse(logicURL)
	var calls atomic.Int32
	var bodies [][]byte
	var mu sync.Mutex
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		req, _ := http.NewRequest(r.Method, target.String()+r.URL.RequestURI(), strings.NewReader(string(b)))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":"unavailable","message":"service unavailable"}}`))
			return
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	defer proxy.Close()
	room := testkit.Uniq("sdk-retry-")
	_, r := newViewer(t, client.ViewerConfig{URLs: []string{cometURL}, Rooms: []string{room}})
	waitKind(t, r, client.Welcome, 1)
	api := &client.API{URL: proxy.URL, RetryWait: 10 * time.Millisecond}
	ids, err := api.Send(context.Background(), "", danmaku.SendRequest{RoomID: room, UserID: 9, UserName: "bot",
		Messages: []danmaku.SendMessage{{Content: "one"}, {Content: "two"}}})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || string(bodies[0]) != string(bodies[1]) {
		t.Fatalf("%d calls, bodies %s and %s: want 2 with the same body", calls.Load(), bodies[0], bodies[len(bodies)-1])
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if got := r.delivered(); len(got) < 2 {
			return fmt.Errorf("delivered %v", got)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // a second copy would come within a window
	raw := 0
	for _, ev := range r.of(client.Messages) {
		raw += len(ev.Msgs)
	}
	if got := r.delivered(); !slices.Equal(got, ids) || raw != 2 {
		t.Errorf("delivered %v (%d in all), want %v once", got, raw, ids)
	}
	// A refusal is not retried.
	calls.Store(10)
	_, err = api.Send(context.Background(), "", danmaku.SendRequest{RoomID: "bad:room", UserID: 9, UserName: "bot",
		Messages: []danmaku.SendMessage{{Content: "x"}}})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 400 || e.Code != danmaku.EINVALID || e.Field != "roomId" || calls.Load() != 11 {
		t.Errorf("bad room: %v (%d calls), want one 400 invalid_argument roomId", err, calls.Load()-10)
	}
}

// Calls to a logic that does not answer fail within the context's
// deadline after their attempts.
func TestSendTimeout(t *testing.T) {
	ln := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // so that the server sees the client go away
		<-r.Context().Done()
	}))
	defer ln.Close()
	api := &client.API{URL: ln.URL, HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}, RetryWait: 10 * time.Millisecond}
	start := time.Now()
	_, err := api.Send(context.Background(), "", danmaku.SendRequest{RoomID: "r", UserID: 1, UserName: "a",
		Messages: []danmaku.SendMessage{{Content: "x"}}})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("send to a silent logic: %v after %v", err, time.Since(start))
	}
}

// Tokens minted by the SDK pass the servers' verifier with their claims:
// HS256 with the shared secret, RS256 and ES256 with the public key.
func TestTokensVerify(t *testing.T) {
	dir := t.TempDir()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	writePEM := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rsaPub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	ecPriv, _ := x509.MarshalECPrivateKey(ecKey)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	const secret = "0123456789abcdef0123456789abcdef"
	v, err := auth.New(auth.Config{HMACSecret: secret, Issuer: "site", Audience: "danmaku",
		PublicKeys: []string{writePEM("rsa.pem", "PUBLIC KEY", rsaPub), writePEM("ec.pem", "PUBLIC KEY", ecPub)}})
	if err != nil {
		t.Fatal(err)
	}
	tok := client.Token{UID: 42, Name: "Ann", Rooms: []string{"lobby", "live-*"}, Roles: []string{client.RoleModerator},
		Issuer: "site", Audience: []string{"danmaku"}, TTL: time.Hour}
	signers := map[string]func() (string, error){
		"HS256": func() (string, error) { return tok.HS256([]byte(secret)) },
		"RS256 PKCS1": func() (string, error) {
			return tok.Sign(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}))
		},
		"RS256 PKCS8": func() (string, error) {
			return tok.Sign(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))
		},
		"ES256": func() (string, error) {
			return tok.Sign(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecPriv}))
		},
	}
	for name, sign := range signers {
		t.Run(name, func(t *testing.T) {
			s, err := sign()
			if err != nil {
				t.Fatal(err)
			}
			c, err := v.Verify(s)
			if err != nil {
				t.Fatal(err)
			}
			if c.UID != 42 || c.Name != "Ann" || !slices.Equal(c.Rooms, tok.Rooms) || time.Until(c.ExpiresAt) < 59*time.Minute ||
				!c.HasRole(auth.RoleModerator) || len(c.Roles) != 1 {
				t.Errorf("claims %+v", c)
			}
		})
	}
	if client.RoleModerator != auth.RoleModerator || client.RoleMember != auth.RoleMember || client.RolePriority != auth.RolePriority {
		t.Error("the client's role names are not the servers'")
	}
	if _, err := (client.Token{UID: 42}).HS256([]byte("short")); err == nil {
		t.Error("a short secret signed")
	}
	if _, err := (client.Token{}).HS256([]byte(secret)); err == nil {
		t.Error("a token without a user signed")
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := tok.Sign(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)})); err == nil {
		t.Error("a 1024-bit RSA key signed")
	}
}

// Subscribe adds a room (its welcome and messages follow), Unsubscribe
// leaves it (confirmed, nothing of it follows), and a room the token does
// not allow is refused and not held.
func TestViewerRooms(t *testing.T) {
	exampleStack()
	a, b, c := testkit.Uniq("sdk-a-"), testkit.Uniq("sdk-b-"), testkit.Uniq("sdk-c-")
	token, err := client.Token{UID: 5, Rooms: []string{a, b}}.HS256([]byte(hmacSecret))
	if err != nil {
		t.Fatal(err)
	}
	v, r := newViewer(t, client.ViewerConfig{URLs: []string{cometURL}, Rooms: []string{a}, Token: token})
	waitKind(t, r, client.Welcome, 1)
	if err := v.Subscribe(b); err != nil {
		t.Fatal(err)
	}
	if err := v.Subscribe(c); err != nil {
		t.Fatal(err)
	}
	refused := waitKind(t, r, client.Refused, 1)
	if e := refused[0].Err.(*client.Error); e.Code != danmaku.CodeFrameForbidden || e.Room != c {
		t.Errorf("refusal %v, want forbidden of %s", e, c)
	}
	waitKind(t, r, client.Welcome, 2)
	if got := v.Rooms(); !slices.Equal(got, []string{a, b}) {
		t.Errorf("rooms %v, want %v", got, []string{a, b})
	}
	api := &client.API{URL: logicURL}
	send := func(room, text string) {
		if _, err := api.Send(context.Background(), "", danmaku.SendRequest{RoomID: room, UserID: 5, UserName: "u",
			Messages: []danmaku.SendMessage{{Content: text}}}); err != nil {
			t.Fatal(err)
		}
	}
	send(a, "to a")
	send(b, "to b")
	waitDelivered(t, r, 2)
	if err := v.Unsubscribe(b); err != nil {
		t.Fatal(err)
	}
	waitKind(t, r, client.Unsubscribed, 1)
	send(b, "after unsub")
	send(a, "to a again")
	waitDelivered(t, r, 3)
	time.Sleep(300 * time.Millisecond)
	for _, ev := range r.of(client.Messages) {
		for _, m := range ev.Msgs {
			if m.Content == "after unsub" {
				t.Errorf("a message of %s after its unsub", b)
			}
			if (ev.Room == a) != strings.HasSuffix(m.Content, "a") && !strings.HasSuffix(m.Content, "again") {
				t.Errorf("%q delivered as a message of %s", m.Content, ev.Room)
			}
		}
	}
}

// A viewer reports a moderator's deletion as a Deleted event, and the loss
// of the room's history (Redis emptied: the room starts a new epoch) as a
// Gap of reason "epoch" from the epoch and position it held, then goes on
// in the new epoch.
func TestViewerDeletionAndGap(t *testing.T) {
	exampleStack()
	room := testkit.Uniq("sdk-gap-")
	v, r := newViewer(t, client.ViewerConfig{URLs: []string{cometURL}, Rooms: []string{room}})
	waitKind(t, r, client.Welcome, 1)
	api := &client.API{URL: logicURL, AdminSecret: adminSecret}
	ctx := context.Background()
	send := func(text string) []string {
		ids, err := api.Send(ctx, "", danmaku.SendRequest{RoomID: room, UserID: 3, UserName: "c",
			Messages: []danmaku.SendMessage{{Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	send("one")
	second := send("two")
	waitDelivered(t, r, 2)
	if _, err := api.Delete(ctx, danmaku.AdminRequest{RoomID: room, IDs: second}); err != nil {
		t.Fatal(err)
	}
	if d := waitKind(t, r, client.Deleted, 1); !slices.Equal(d[0].IDs, second) || d[0].Room != room {
		t.Errorf("deleted event %+v, want %v of %s", d[0], second, room)
	}
	oldEpoch, oldPos, _ := v.Position(room)
	if err := examplesStack.RDB().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The comet registers its viewer again within its reconcile period;
	// send until a message of the new epoch arrives.
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		send("after the loss")
		return testkit.Soon(time.Second, func() error {
			if len(r.of(client.Gap)) == 0 {
				return errors.New("no gap yet")
			}
			return nil
		})
	})
	g := r.of(client.Gap)[0].Gap
	if g.Reason != "epoch" || g.Epoch != oldEpoch || g.Pos != oldPos || g.ServerEpoch == oldEpoch || g.ServerEpoch == "" {
		t.Errorf("gap %+v, want epoch %s pos %d to a new epoch", *g, oldEpoch, oldPos)
	}
	if e, _, _ := v.Position(room); e != g.ServerEpoch {
		t.Errorf("position in epoch %s after the gap, want %s", e, g.ServerEpoch)
	}
}

// Close returns even when the application stopped reading the viewer's
// events and their channel is full.
func TestViewerCloseUnread(t *testing.T) {
	exampleStack()
	room := testkit.Uniq("sdk-unread-")
	v, err := client.NewViewer(client.ViewerConfig{URLs: []string{cometURL}, Rooms: []string{room}, Buffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	api := &client.API{URL: logicURL}
	for i := 0; i < 3; i++ {
		if _, err := api.Send(context.Background(), "", danmaku.SendRequest{RoomID: room, UserID: 4, UserName: "d",
			Messages: []danmaku.SendMessage{{Content: "unread"}}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // the viewer blocks on its full channel
	closed := make(chan struct{})
	go func() { v.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked behind unread events")
	}
	for range v.Events() {
	}
}

// A viewer reports a room's settings and pin: a moderator's change of the
// modes as a StateChanged event, a pin and its early end as PinChanged
// events (the pin, then nil); a viewer that joins later is told both by
// its welcome. RoomState and Pinned answer the same.
func TestViewerRoomState(t *testing.T) {
	exampleStack()
	room := testkit.Uniq("sdk-state-")
	v, r := newViewer(t, client.ViewerConfig{URLs: []string{cometURL}, Rooms: []string{room}})
	waitKind(t, r, client.Welcome, 1)
	if _, ok := v.RoomState(room); ok || v.Pinned(room) != nil || len(r.of(client.StateChanged))+len(r.of(client.PinChanged)) > 0 {
		t.Fatalf("a room never set: state or pin reported")
	}
	api := &client.API{URL: logicURL, AdminSecret: adminSecret}
	ctx := context.Background()
	slow := 30
	if _, err := api.RoomSettings(ctx, danmaku.AdminRequest{RoomID: room, SlowSeconds: &slow}); err != nil {
		t.Fatal(err)
	}
	st := waitKind(t, r, client.StateChanged, 1)[0]
	if st.Room != room || st.State == nil || st.State.SlowSeconds != 30 || st.State.Ver < 1 {
		t.Errorf("state event %+v", st)
	}
	if got, ok := v.RoomState(room); !ok || got.SlowSeconds != 30 {
		t.Errorf("RoomState %+v %v", got, ok)
	}
	pinned, err := api.Pin(ctx, danmaku.AdminRequest{RoomID: room, Content: "welcome all", Duration: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	pe := waitKind(t, r, client.PinChanged, 1)[0]
	if pe.Pin == nil || pe.Pin.Content != "welcome all" || pe.Pin.ID != pinned.Pin.ID {
		t.Errorf("pin event %+v, want the pin %+v", pe, pinned.Pin)
	}
	if p := v.Pinned(room); p == nil || p.ID != pinned.Pin.ID {
		t.Errorf("Pinned %+v", p)
	}

	// A later viewer: both come with its welcome.
	_, late := newViewer(t, client.ViewerConfig{URLs: []string{cometURL}, Rooms: []string{room}})
	if s := waitKind(t, late, client.StateChanged, 1)[0]; s.State.SlowSeconds != 30 {
		t.Errorf("late viewer's state %+v", s.State)
	}
	if p := waitKind(t, late, client.PinChanged, 1)[0]; p.Pin == nil || p.Pin.ID != pinned.Pin.ID {
		t.Errorf("late viewer's pin %+v", p.Pin)
	}

	if _, err := api.Unpin(ctx, danmaku.AdminRequest{RoomID: room, IDs: []string{pinned.Pin.ID}}); err != nil {
		t.Fatal(err)
	}
	if un := waitKind(t, r, client.PinChanged, 2)[1]; un.Pin != nil || un.Room != room {
		t.Errorf("unpin event %+v, want a nil pin", un)
	}
	if p := v.Pinned(room); p != nil {
		t.Errorf("Pinned after the unpin: %+v", p)
	}
}

// A viewer whose comet restarts after the room's history moved past the
// viewer's position (history_size 5, 20 comments while it was away)
// reports a Gap of reason "resume" (the comet's welcome said recovered
// false) from where it stood to the room's head, and goes on with the
// recent history.
func TestViewerResumeGap(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1, Job: []string{"-job.history_size", "5", "-job.history_span", "0s"}})
	room := testkit.Uniq("sdk-resume-gap-")
	v, r := newViewer(t, client.ViewerConfig{URLs: []string{s.Comets[0].WS()}, Rooms: []string{room},
		BackoffMin: 100 * time.Millisecond, BackoffMax: 500 * time.Millisecond})
	waitKind(t, r, client.Welcome, 1)
	api := &client.API{URL: s.LogicURL}
	send := func(n int) []string {
		var ids []string
		for i := 0; i < n; i++ {
			got, err := api.Send(context.Background(), "", danmaku.SendRequest{RoomID: room, UserID: 6, UserName: "f",
				Messages: []danmaku.SendMessage{{Content: fmt.Sprint("comment ", i)}}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, got...)
		}
		return ids
	}
	send(3)
	waitDelivered(t, r, 3)
	epoch, pos, _ := v.Position(room)
	s.Comets[0].Kill()
	away := send(20)
	// The comet comes back once job has positioned all 20 (an accepted
	// send is not yet a position), so the head the resume meets is pos+20.
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		h, err := api.History(context.Background(), "", room, -1, 1)
		if err != nil || h.Pos != pos+20 {
			return fmt.Errorf("the room's head %d (%v), want %d", h.Pos, err, pos+20)
		}
		return nil
	})
	s.Comets[0].Restart(t)
	g := waitKind(t, r, client.Gap, 1)[0].Gap
	if g.Reason != "resume" || g.Epoch != epoch || g.Pos != pos || g.ServerEpoch != epoch || g.ServerPos != pos+20 {
		t.Errorf("gap %+v, want resume from %s:%d to position %d", *g, epoch, pos, pos+20)
	}
	if w := r.of(client.Welcome); w[len(w)-1].Welcome.Recovered == nil || *w[len(w)-1].Welcome.Recovered {
		t.Errorf("the resume's welcome %+v, want recovered false", w[len(w)-1].Welcome)
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		got := r.delivered()
		if len(got) < 3+5 || got[len(got)-1] != away[len(away)-1] {
			return fmt.Errorf("delivered %d, the last %v", len(got), got[len(got)-1:])
		}
		return nil
	})
}

// A viewer whose WebSocket handshakes are answered by something in the
// way (a proxy that refuses upgrades) falls back to SSE by itself: it
// says so, receives its room, and its Subscribe and Unsubscribe go
// through the stream's ops.
func TestViewerFallsBackToSSE(t *testing.T) {
	exampleStack()
	target, _ := url.Parse(strings.Replace(strings.TrimSuffix(cometURL, "/ws"), "ws://", "http://", 1))
	rp := httputil.NewSingleHostReverseProxy(target)
	var upgrades atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			upgrades.Add(1)
			http.Error(w, "upgrades are not allowed here", http.StatusBadRequest)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close) // after the viewers' (cleanups run newest first)
	a, b := testkit.Uniq("sdk-fb-a-"), testkit.Uniq("sdk-fb-b-")
	v, r := newViewer(t, client.ViewerConfig{URLs: []string{"ws" + strings.TrimPrefix(proxy.URL, "http") + "/ws"}, Rooms: []string{a},
		BackoffMin: 50 * time.Millisecond})
	waitKind(t, r, client.Welcome, 1)
	if v.Transport() != client.TransportSSE || upgrades.Load() != 1 {
		t.Errorf("transport %s after %d WebSocket handshakes, want sse after 1", v.Transport(), upgrades.Load())
	}
	if c := r.of(client.Connected); len(c) != 1 || c[0].URL != proxy.URL+"/sse" {
		t.Errorf("connected events %+v, want one to %s/sse", c, proxy.URL)
	}
	if err := v.Subscribe(b); err != nil {
		t.Fatal(err)
	}
	waitKind(t, r, client.Welcome, 2)
	api := &client.API{URL: logicURL}
	for _, room := range []string{a, b} {
		if _, err := api.Send(context.Background(), "", danmaku.SendRequest{RoomID: room, UserID: 2, UserName: "g",
			Messages: []danmaku.SendMessage{{Content: "to " + room}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitDelivered(t, r, 2)
	if err := v.Unsubscribe(b); err != nil {
		t.Fatal(err)
	}
	waitKind(t, r, client.Unsubscribed, 1)
	if len(r.of(client.Disconnected)) > 0 {
		t.Errorf("disconnected: %+v", r.of(client.Disconnected))
	}
	// A viewer bound to WebSockets does not fall back.
	_, ws := newViewer(t, client.ViewerConfig{URLs: []string{"ws" + strings.TrimPrefix(proxy.URL, "http") + "/ws"}, Rooms: []string{a},
		Transport: client.TransportWebSocket, BackoffMin: 50 * time.Millisecond})
	if d := waitKind(t, ws, client.Disconnected, 1)[0]; !strings.HasSuffix(d.URL, "/ws") {
		t.Errorf("a WebSocket-only viewer tried %s", d.URL)
	}
}
