package comet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

func TestJoinSwitchLeave(t *testing.T) {
	s, store := mustStart(t, nil)
	r1, r2 := testkit.Uniq("r1-"), testkit.Uniq("r2-")

	a := mustDial(t, s, "room="+r1+"&uid=alice")
	w := mustReadOp(t, a, opWelcome)
	if w.Room != r1 || w.Online != 1 || !strings.HasPrefix(w.ConnID, "c-") || w.Heart != s.cfg.PingPeriod.Milliseconds() {
		t.Fatalf("welcome %+v", w)
	}
	expectRoutes(t, store, s, r1, 1)

	// Join by op instead of query parameter.
	b := mustDial(t, s, "")
	mustSend(t, b, map[string]string{"op": "join", "room": r1})
	if w := mustReadOp(t, b, opWelcome); w.Online != 2 || w.Room != r1 {
		t.Fatalf("second welcome %+v", w)
	}
	expectRoutes(t, store, s, r1, 2)

	// Switch rooms: Unregister + Register.
	mustSend(t, b, map[string]string{"op": "join", "room": r2})
	if w := mustReadOp(t, b, opWelcome); w.Online != 1 || w.Room != r2 {
		t.Fatalf("welcome after switch %+v", w)
	}
	expectRoutes(t, store, s, r1, 1)
	expectRoutes(t, store, s, r2, 1)
	if got := s.hub.local(r1); got != 1 {
		t.Fatalf("local viewers of r1 = %d, want 1", got)
	}

	// Joining the room one is in again only repeats the welcome.
	mustSend(t, b, map[string]string{"op": "join", "room": r2})
	mustReadOp(t, b, opWelcome)
	expectRoutes(t, store, s, r2, 1)

	a.Close()
	expectRoutes(t, store, s, r1, 0)
	b.Close()
	expectRoutes(t, store, s, r2, 0)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if rooms, conns := s.hub.counts(); rooms != 0 || conns != 0 {
			return errors.New("hub not empty")
		}
		return nil
	})
}

func TestPushFanOut(t *testing.T) {
	s, _ := mustStart(t, nil)
	ra, rb := testkit.Uniq("ra-"), testkit.Uniq("rb-")
	var inA, inB []*wsviewer.Conn
	for range 3 {
		c := mustDial(t, s, "room="+ra)
		mustReadOp(t, c, opWelcome)
		inA = append(inA, c)
	}
	for range 2 {
		c := mustDial(t, s, "room="+rb)
		mustReadOp(t, c, opWelcome)
		inB = append(inB, c)
	}
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()

	if n := mustPush(t, p, s, batch(ra, "m1", "m2")); n != 3 {
		t.Fatalf("delivered %d, want 3", n)
	}
	for _, c := range inA {
		f := mustReadOp(t, c, danmaku.OpMsgs)
		if f.Room != ra || !reflect.DeepEqual(msgIDs(f), []string{"m1", "m2"}) || f.Msgs[0].Content != "hello m1" {
			t.Fatalf("frame %+v", f)
		}
	}
	// The same batch again reaches nobody; a batch with one old and one new
	// message carries only the new one.
	if n := mustPush(t, p, s, batch(ra, "m1", "m2")); n != 0 {
		t.Fatalf("repeated batch delivered %d, want 0", n)
	}
	if n := mustPush(t, p, s, batch(ra, "m2", "m3")); n != 3 {
		t.Fatalf("delivered %d, want 3", n)
	}
	for _, c := range inA {
		if f := mustReadOp(t, c, danmaku.OpMsgs); !reflect.DeepEqual(msgIDs(f), []string{"m3"}) {
			t.Fatalf("after duplicate: got %v, want [m3]", msgIDs(f))
		}
	}
	// Room B saw nothing of room A: its first frame is its own batch.
	if n := mustPush(t, p, s, batch(rb, "m1")); n != 2 {
		t.Fatalf("delivered %d to room B, want 2", n)
	}
	for _, c := range inB {
		if f := mustReadOp(t, c, danmaku.OpMsgs); f.Room != rb || !reflect.DeepEqual(msgIDs(f), []string{"m1"}) {
			t.Fatalf("room B frame %+v", f)
		}
	}
	// A room without viewers here.
	if n := mustPush(t, p, s, batch(testkit.Uniq("empty-"), "x")); n != 0 {
		t.Fatalf("delivered %d to an empty room", n)
	}
	if got := value(t, s.metrics.duplicateMsgs); got != 3 {
		t.Fatalf("duplicate messages counted %v, want 3", got)
	}
}

func TestPingPong(t *testing.T) {
	s, _ := mustStart(t, nil)
	c := mustDial(t, s, "room="+testkit.Uniq("r-"))
	mustReadOp(t, c, opWelcome)
	mustSend(t, c, map[string]string{"op": "ping"})
	mustReadOp(t, c, opPong)
}

func TestHeartbeat(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) {
		c.PingPeriod = 100 * time.Millisecond
		c.PongWait = time.Second
		c.WriteWait = 300 * time.Millisecond
	})
	room := testkit.Uniq("r-")
	// A live viewer answers pings (the client library does while reading)
	// and stays connected well past PongWait, and past the write deadline
	// of the last frame it was sent (pings are written after it passed).
	live := mustDial(t, s, "room="+room)
	mustReadOp(t, live, opWelcome)
	pings := make(chan struct{}, 100)
	// The raw socket: this viewer answers the comet's pings itself.
	live.WS().SetPingHandler(func(data string) error {
		select {
		case pings <- struct{}{}:
		default:
		}
		return live.WS().WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	liveErr := make(chan error, 1)
	go func() {
		for {
			if _, _, err := live.NextRaw(3 * time.Second); err != nil {
				liveErr <- err
				return
			}
		}
	}()
	// A dead viewer never reads, so it never answers a ping.
	dead := mustDial(t, s, "room="+room)
	mustReadOp(t, dead, opWelcome)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if n := s.hub.local(room); n > 1 {
			return errors.New("dead viewer still connected")
		}
		return nil
	})
	select {
	case err := <-liveErr:
		t.Fatalf("live viewer dropped: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if n := s.hub.local(room); n != 1 {
		t.Fatalf("%d viewers left, want the live one", n)
	}
	if len(pings) == 0 {
		t.Fatal("live viewer was never pinged")
	}
}

func TestSlowConsumer(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.QueueSize = 4 })
	room := testkit.Uniq("r-")

	// The slow viewer has a tiny receive buffer and never reads.
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(4096)
		}
		return c, err
	}}
	slow, _, err := d.Dial(wsURL(s, "room="+room), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	mustReadOp(t, wsviewer.Wrap(slow), opWelcome)

	const fast = 2
	var got [fast]atomic.Int64
	var wg sync.WaitGroup
	for i := range fast {
		c := mustDial(t, s, "room="+room)
		mustReadOp(t, c, opWelcome)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				f, _, err := c.Next(10 * time.Second)
				if err != nil {
					return
				}
				if f.Msgs != nil {
					got[i].Add(int64(len(f.Msgs.Msgs)))
				}
			}
		}()
	}
	expectRoutes(t, store, s, room, 3)

	sent := 0
	waitFast := func() {
		t.Helper()
		testkit.SucceedsSoon(t, 10*time.Second, func() error {
			for i := range fast {
				if n := got[i].Load(); n != int64(sent) {
					return fmt.Errorf("fast viewer %d got %d of %d batches (slow disconnects %v)", i, n, sent, value(t, s.metrics.slowConsumers))
				}
			}
			return nil
		})
	}
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	big := strings.Repeat("x", 64<<10)
	// The socket buffers hold a few MiB at most: 1000 batches of 64 KiB
	// overflow them and the queue many times over.
	for sent < 1000 && value(t, s.metrics.slowConsumers) == 0 {
		b := batch(room, testkit.Uniq("s"))
		b.Msgs[0].Content = big
		mustPush(t, p, s, b)
		sent++
		// Fast viewers keep up: each batch is read before the next is sent.
		waitFast()
	}
	if value(t, s.metrics.slowConsumers) == 0 {
		t.Fatalf("slow viewer never disconnected after %d batches", sent)
	}
	t.Logf("slow viewer disconnected after %d batches", sent)
	// The room goes on: more batches reach the fast viewers.
	for i := range 5 {
		mustPush(t, p, s, batch(room, "after"+string(rune('a'+i))))
		sent++
	}
	waitFast()
	expectRoutes(t, store, s, room, 2)
	if n := s.hub.local(room); n != 2 {
		t.Fatalf("local viewers %d, want 2", n)
	}
}

func TestGracefulShutdown(t *testing.T) {
	s, store := mustStart(t, nil)
	r1, r2 := testkit.Uniq("r1-"), testkit.Uniq("r2-")
	var viewers []*wsviewer.Conn
	for i := range 4 {
		room := r1
		if i%2 == 1 {
			room = r2
		}
		c := mustDial(t, s, "room="+room+"&uid=u"+string(rune('0'+i)))
		mustReadOp(t, c, opWelcome)
		viewers = append(viewers, c)
	}
	expectRoutes(t, store, s, r1, 2)
	ctx := context.Background()
	if live, _ := store.LiveComets(ctx); live[s.ID()].Addr != s.AdvertiseAddr() {
		t.Fatalf("lease %+v, want addr %s", live[s.ID()], s.AdvertiseAddr())
	}

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	for _, c := range viewers {
		_, _, err := c.NextRaw(5 * time.Second)
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
			t.Fatalf("viewer got %v, want close 1001", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, room := range []string{r1, r2} {
		n, _ := store.Online(ctx, room)
		rc, _ := roomComets(t, room)
		if n != 0 || len(rc) != 0 {
			t.Fatalf("room %s after shutdown: online %d, comets %v", room, n, rc)
		}
	}
	if live, _ := store.LiveComets(ctx); live[s.ID()].ID != "" {
		t.Fatalf("lease still present: %+v", live[s.ID()])
	}
	// New viewers are refused.
	if _, resp, err := wsviewer.TryDial(wsURL(s, "room="+r1), nil); err == nil || (resp != nil && resp.StatusCode == http.StatusSwitchingProtocols) {
		t.Fatal("dial after shutdown succeeded")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
}

func TestCompression(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) { c.Compression = true })
	room := testkit.Uniq("r-")
	d := websocket.Dialer{EnableCompression: true}
	var viewers []*wsviewer.Conn
	for range 2 {
		c, resp, err := d.Dial(wsURL(s, "room="+room), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !strings.Contains(resp.Header.Get("Sec-Websocket-Extensions"), "permessage-deflate") {
			t.Fatalf("compression not negotiated: %v", resp.Header)
		}
		mustReadOp(t, wsviewer.Wrap(c), opWelcome)
		viewers = append(viewers, wsviewer.Wrap(c))
	}
	plain := mustDial(t, s, "room="+room)
	mustReadOp(t, plain, opWelcome)
	viewers = append(viewers, plain)

	b := batch(room, "z1")
	b.Msgs[0].Content = strings.Repeat("compressible ", 200)
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	if n := mustPush(t, p, s, b); n != 3 {
		t.Fatalf("delivered %d, want 3", n)
	}
	for _, c := range viewers {
		if f := mustReadOp(t, c, danmaku.OpMsgs); f.Msgs[0].Content != b.Msgs[0].Content {
			t.Fatal("content changed")
		}
	}

	// The frame is encoded once per wire form, not per viewer: after going
	// to two compressing viewers and one plain one, the prepared message
	// holds three encodings, each computed once: the plain frame made by
	// NewPreparedMessage, the plain frame keyed by the connections'
	// compression level, and the deflated one shared by both compressing
	// viewers.
	data, _ := json.Marshal(batch(room, "z2"))
	pm, _ := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if n, _ := s.hub.deliver(room, item{PM: pm, Size: len(data)}, nil); n != 3 {
		t.Fatalf("delivered %d", n)
	}
	for _, c := range viewers {
		mustReadOp(t, c, danmaku.OpMsgs)
	}
	if forms := reflect.ValueOf(pm).Elem().FieldByName("frames").Len(); forms != 3 {
		t.Fatalf("prepared message holds %d encodings, want 3", forms)
	}
}

func TestLeaseRenewed(t *testing.T) {
	s, store := mustStart(t, nil)
	// The lease outlives several TTLs because it is renewed.
	time.Sleep(2 * s.cfg.LeaseTTL)
	live, err := store.LiveComets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if live[s.ID()].Addr != s.AdvertiseAddr() {
		t.Fatalf("lease missing after %v: %+v", 2*s.cfg.LeaseTTL, live)
	}
}

// A viewer that cannot be registered (Redis not answering) is told so and
// closed with 1013; once Redis is back, viewers join again.
func TestRegistryUnavailable(t *testing.T) {
	s, srv := startOnPrivateRedis(t, 300*time.Millisecond)
	room := testkit.Uniq("r-")

	resume := srv.PauseUntilResumed(t)
	c := mustDial(t, s, "room="+room)
	if f := mustReadOp(t, c, opError); f.Code != codeUnavailable {
		t.Fatalf("error frame %+v", f)
	}
	_, _, err := c.NextRaw(5 * time.Second)
	if !websocket.IsCloseError(err, CloseUnavailable) {
		t.Fatalf("got %v, want close %d", err, CloseUnavailable)
	}
	resume()

	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		c, _, err := wsviewer.TryDial(wsURL(s, "room="+room), nil)
		if err != nil {
			return err
		}
		defer c.Close()
		_, data, err := c.NextRaw(5 * time.Second)
		if err != nil || !strings.Contains(string(data), `"op":"welcome"`) {
			return fmt.Errorf("after resume: %s %v", data, err)
		}
		return nil
	})
}
