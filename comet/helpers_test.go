package comet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
	"github.com/danmaku/danmaku/route"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(viewerProcessEnv); url != "" {
		os.Exit(viewerProcess(url))
	}
	code := redisserver.Run(m)
	removeIdleload()
	os.Exit(code)
}

const testSecret = "test-push-secret"

func testConfig(tb testing.TB) Config {
	cfg := DefaultConfig()
	cfg.ID = testkit.Uniq("comet-")
	cfg.Listen = "127.0.0.1:0"
	cfg.InternalListen = "127.0.0.1:0"
	cfg.Secret = testSecret
	cfg.MaxConnsPerIP = 0
	cfg.LeaseRenew = 200 * time.Millisecond
	cfg.LeaseTTL = time.Second
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.OnlinePeriod = 0 // tests that want online frames turn them on
	return cfg
}

// mustStart starts a comet on loopback ports with real Redis routes.
func mustStart(tb testing.TB, mutate func(*Config)) (*Server, *route.Store) {
	tb.Helper()
	cfg := testConfig(tb)
	if mutate != nil {
		mutate(&cfg)
	}
	store := route.New(redisserver.Client(tb))
	s, err := New(cfg, Deps{Store: store})
	if err != nil {
		tb.Fatalf("new comet: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		tb.Fatalf("start comet: %v", err)
	}
	tb.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, store
}

// startOnPrivateRedis starts a comet on a Redis server of its own (which
// the test may stop or pause) with the given Redis timeout.
func startOnPrivateRedis(tb testing.TB, timeout time.Duration) (*Server, *redisserver.Server) {
	tb.Helper()
	srv, rdb := redisserver.Private(tb)
	cfg := testConfig(tb)
	cfg.RedisTimeout = timeout
	s, err := New(cfg, Deps{Store: route.New(rdb)})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, srv
}

func wsURL(s *Server, query string) string {
	u := "ws://" + s.PublicAddr() + "/ws"
	if query != "" {
		u += "?" + query
	}
	return u
}

// mustDial opens a viewer connection; query is the raw query string.
func mustDial(tb testing.TB, s *Server, query string) *wsviewer.Conn {
	tb.Helper()
	return wsviewer.DialConn(tb, wsURL(s, query), nil)
}

// frame is any server frame, decoded into its root type
// (danmaku.ServerFrame) and flattened for the tests' checks.
type frame struct {
	Op      string
	ConnID  string
	Room    string
	Online  int64
	Heart   int64
	Code    string
	Message string
	// RetryAfterMs is the wait a rate_limited error frame names.
	RetryAfterMs int64
	Msgs         []danmaku.Message
	Epoch        string
	Pos          int64
	Replay       bool
	// Recovered is nil when the welcome has no recovered field.
	Recovered *bool
	// IDs are the deleted ids of a del frame.
	IDs []string
	// Skipped is a thinned msgs frame's count of left-out messages; Max a
	// density frame's cap, Density a welcome's.
	Skipped int64
	Max     int
	Density int
}

// flat is f's fields in one frame.
func flat(f danmaku.ServerFrame) frame {
	out := frame{Op: f.Op}
	switch {
	case f.Welcome != nil:
		w := f.Welcome
		out.ConnID, out.Room, out.Online, out.Heart = w.ConnID, w.Room, w.Online, w.HeartbeatMs
		out.Epoch, out.Pos, out.Recovered, out.Density = w.Epoch, w.Pos, w.Recovered, w.Density
	case f.Msgs != nil:
		out.Room, out.Epoch, out.Replay, out.Msgs = f.Msgs.Room, f.Msgs.Epoch, f.Msgs.Replay, f.Msgs.Msgs
		out.Skipped = f.Msgs.Skipped
	case f.Del != nil:
		out.Room, out.IDs = f.Del.Room, f.Del.IDs
	case f.Error != nil:
		e := f.Error
		out.Room, out.Code, out.Message, out.RetryAfterMs = e.Room, e.Code, e.Message, e.RetryAfterMs
	case f.Online != nil:
		out.Room, out.Online = f.Online.Room, f.Online.Online
	case f.Unsubscribed != nil:
		out.Room = f.Unsubscribed.Room
	case f.Density != nil:
		out.Room, out.Max = f.Density.Room, f.Density.Max
	}
	return out
}

func mustRead(tb testing.TB, ws *wsviewer.Conn) frame {
	tb.Helper()
	return flat(ws.MustNext(tb, 5*time.Second))
}

func mustReadOp(tb testing.TB, ws *wsviewer.Conn, op string) frame {
	tb.Helper()
	f := mustRead(tb, ws)
	if f.Op != op {
		tb.Fatalf("got frame %+v, want op %q", f, op)
	}
	return f
}

func mustSend(tb testing.TB, ws *wsviewer.Conn, v any) {
	tb.Helper()
	ws.MustSend(tb, v)
}

// expectClose reads ws until the server closes it, which must be with
// code.
func expectClose(tb testing.TB, ws *wsviewer.Conn, code int) {
	tb.Helper()
	ws.ExpectClose(tb, code, 5*time.Second)
}

// expectNoFrame checks that nothing arrives on ws within d.
func expectNoFrame(tb testing.TB, ws *wsviewer.Conn, d time.Duration) {
	tb.Helper()
	if _, data, err := ws.NextRaw(d); err == nil {
		tb.Fatalf("unexpected frame %s", data)
	}
}

// roomComets reads room:comets:{room} (comet id -> viewers), the index
// job's BeginBroadcast reads to find a room's comets.
func roomComets(tb testing.TB, room string) (map[string]int64, error) {
	raw, err := redisserver.Client(tb).HGetAll(context.Background(), "room:comets:{"+room+"}").Result()
	out := make(map[string]int64, len(raw))
	for comet, v := range raw {
		out[comet], _ = strconv.ParseInt(v, 10, 64)
	}
	return out, err
}

// expectRoutes checks Online and this comet's room:comets entry for room.
func expectRoutes(tb testing.TB, store *route.Store, s *Server, room string, want int64) {
	tb.Helper()
	testkit.SucceedsSoon(tb, 5*time.Second, func() error {
		ctx := context.Background()
		n, err := store.Online(ctx, room)
		if err != nil {
			return err
		}
		rc, err := roomComets(tb, room)
		if err != nil {
			return err
		}
		if n != want || rc[s.ID()] != want {
			return fmt.Errorf("room %s: online %d, room comets %v; want %d", room, n, rc, want)
		}
		return nil
	})
}

func batch(room string, ids ...string) danmaku.Batch {
	msgs := make([]danmaku.Message, len(ids))
	for i, id := range ids {
		msgs[i] = danmaku.Message{ID: id, UID: int64(i + 1), Name: "n" + id, Content: "hello " + id, TS: int64(1730620801000 + i)}
	}
	return danmaku.NewBatch(room, msgs)
}

func mustPush(tb testing.TB, p *push.Client, s *Server, b danmaku.Batch) int {
	tb.Helper()
	body, _ := json.Marshal(b)
	n, err := p.Push(context.Background(), s.AdvertiseAddr(), body)
	if err != nil {
		tb.Fatalf("push %v: %v", b, err)
	}
	return n
}

func msgIDs(f frame) []string {
	out := make([]string, len(f.Msgs))
	for i, m := range f.Msgs {
		out[i] = m.ID
	}
	return out
}

// value reads a counter or gauge.
func value(tb testing.TB, c prometheus.Metric) float64 {
	tb.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		tb.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// local returns the number of local viewers of id.
func (h *hub) local(id string) int {
	r := h.room(id)
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.members)
}

// deliver enqueues it to every local viewer of id; see deliverLocked.
func (h *hub) deliver(id string, it item, slow []*conn) (int, []*conn) {
	r := h.room(id)
	if r == nil {
		return 0, slow
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliverLocked(it, slow)
}
