package comet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// A connection's room ops (join, sub, unsub) beyond its burst are refused
// with the error frame rate_limited naming the room and when to retry,
// counted, and never reach the registry; after the wait an op is served
// again and the connection was never closed.
func TestOpsRateLimit(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.OpsRate, c.OpsBurst = 2, 4 })
	a, b := testkit.Uniq("ops"), testkit.Uniq("ops")
	ws := mustDial(t, s, "room="+a)
	mustReadOp(t, ws, opWelcome)
	for i := range 4 { // the burst: the URL's room did not count
		room := a
		if i%2 == 0 {
			room = b
		}
		mustSend(t, ws, map[string]string{"op": "join", "room": room})
		if f := mustReadOp(t, ws, opWelcome); f.Room != room {
			t.Fatalf("op %d: welcome %+v", i, f)
		}
	}
	var f frame
	for _, op := range []string{"join", "sub", "unsub"} {
		mustSend(t, ws, map[string]string{"op": op, "room": b})
		f = mustReadOp(t, ws, opError)
		if f.Code != codeRateLimited || f.Room != b || f.RetryAfterMs <= 0 || f.RetryAfterMs > 1000 {
			t.Fatalf("%s beyond the burst: %+v, want rate_limited with retryAfterMs in (0, 1000]", op, f)
		}
	}
	expectRoutes(t, store, s, b, 0)
	expectRoutes(t, store, s, a, 1)
	if v := value(t, s.metrics.opsLimited); v != 3 {
		t.Fatalf("ops_rate_limited_total %v, want 3", v)
	}
	mustSend(t, ws, map[string]string{"op": "ping"})
	mustReadOp(t, ws, opPong) // pings are not ops
	time.Sleep(time.Duration(f.RetryAfterMs) * time.Millisecond)
	mustSend(t, ws, map[string]string{"op": "sub", "room": b})
	if f := mustReadOp(t, ws, opWelcome); f.Room != b {
		t.Fatalf("after the wait: %+v", f)
	}
}

// The token bucket: a burst, then the rate, with the wait to the next
// token.
func TestOpBucket(t *testing.T) {
	var b opBucket
	now := time.Duration(0)
	for i := range 3 {
		if ok, _ := b.take(10, 3, now); !ok {
			t.Fatalf("op %d of the burst refused", i)
		}
	}
	ok, wait := b.take(10, 3, now)
	if ok || wait != 100*time.Millisecond {
		t.Fatalf("beyond the burst: %v %v, want refused for 100ms", ok, wait)
	}
	now += 50 * time.Millisecond
	if ok, wait := b.take(10, 3, now); ok || wait != 50*time.Millisecond {
		t.Fatalf("half way: %v %v", ok, wait)
	}
	now += 50 * time.Millisecond
	if ok, _ := b.take(10, 3, now); !ok {
		t.Fatal("a token after 100ms refused")
	}
	if ok, _ := b.take(0, 0, now); !ok {
		t.Fatal("rate 0 (no limit) refused")
	}
}

// A URL naming far more rooms than a connection may hold gets the
// connection's rooms and one error frame too_many_rooms for the rest; it
// is not cut as a slow consumer, and stays usable.
func TestTooManyRoomsInURL(t *testing.T) {
	s, _ := mustStart(t, nil)
	pfx := testkit.Uniq("url")
	var q []string
	for i := range 300 {
		q = append(q, fmt.Sprintf("room=%s-%d", pfx, i))
	}
	ws := mustDial(t, s, strings.Join(q, "&"))
	max := s.cfg.MaxRoomsPerConn
	for i := range max {
		if f := mustReadOp(t, ws, opWelcome); f.Room != fmt.Sprintf("%s-%d", pfx, i) {
			t.Fatalf("welcome %d: %+v", i, f)
		}
	}
	f := mustReadOp(t, ws, opError)
	want := fmt.Sprintf("%s-%d and %d more", pfx, max, 300-max-1)
	if f.Code != codeTooMany || f.Room != fmt.Sprintf("%s-%d", pfx, max) || !strings.Contains(f.Message, want) {
		t.Fatalf("error frame %+v, want one too_many_rooms naming %q", f, want)
	}
	mustSend(t, ws, map[string]string{"op": "ping"})
	mustReadOp(t, ws, opPong)
	if v := value(t, s.metrics.slowConsumers); v != 0 {
		t.Fatalf("slow consumers %v", v)
	}
}

// fakeAddrListener hands out connections whose RemoteAddr is from, so one
// test can connect "from" many IPv6 addresses.
type fakeAddrListener struct {
	net.Listener
	from atomic.Pointer[string]
}

type fakeAddrConn struct {
	net.Conn
	addr net.Addr
}

func (c fakeAddrConn) RemoteAddr() net.Addr { return c.addr }

func (l *fakeAddrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return fakeAddrConn{c, &net.TCPAddr{IP: net.ParseIP(*l.from.Load()), Port: 40000}}, nil
}

// The per-address limit counts IPv6 clients per /64 (ipv6_prefix), like
// logic's address limits: a client rotating through its /64 cannot open
// more than max_conns_per_ip connections; another /64 and IPv4 addresses
// have their own.
func TestPerIPLimitIPv6Prefix(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) { c.MaxConnsPerIP = 3 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &fakeAddrListener{Listener: ln}
	srv := &http.Server{Handler: s.PublicHandler()}
	go srv.Serve(fl)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	dial := func(from string) (int, error) {
		fl.from.Store(&from)
		ws, resp, err := wsviewer.TryDial("ws://"+ln.Addr().String()+"/ws", nil)
		if err != nil {
			if resp == nil {
				return 0, err
			}
			return resp.StatusCode, nil
		}
		t.Cleanup(func() { ws.Close() })
		return 101, nil
	}
	for i := range 3 {
		if st, err := dial(fmt.Sprintf("2001:db8:1:2::%x", i+1)); st != 101 {
			t.Fatalf("connection %d of the /64: %d %v", i, st, err)
		}
	}
	if st, err := dial("2001:db8:1:2:ffff:1:2:3"); st != http.StatusTooManyRequests {
		t.Fatalf("fourth address of the /64: %d %v, want 429", st, err)
	}
	if st, err := dial("2001:db8:1:3::1"); st != 101 {
		t.Fatalf("another /64: %d %v", st, err)
	}
	l := newIPLimiter(1, 128)
	if _, ok := l.acquire("2001:db8::1"); !ok {
		t.Fatal("first address refused")
	}
	if _, ok := l.acquire("2001:db8::2"); !ok {
		t.Fatal("ipv6_prefix 128: another address counted with the first")
	}
	if k := newIPLimiter(1, 64).key("192.0.2.7"); k != "192.0.2.7" {
		t.Fatalf("IPv4 key %q", k)
	}
}
