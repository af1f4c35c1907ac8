package logic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// writeHistory gives n new messages of room positions through
// BeginBroadcast, as job does, in batches of at most 50, and returns their
// ids in position order.
func writeHistory(t *testing.T, e *testEnv, room string, n, size int) []string {
	t.Helper()
	ctx := context.Background()
	s := route.New(e.rdb)
	var ids []string
	var known route.Head
	for len(ids) < n {
		var batch []danmaku.Message
		for len(batch) < min(50, n-len(ids)) {
			id := fmt.Sprintf("%s-m%d", room, len(ids)+len(batch)+1)
			batch = append(batch, danmaku.Message{ID: id, UID: 1, Name: "tester", Content: "c " + id, TS: 1})
		}
		b, err := s.BeginBroadcast(ctx, room, batch, route.BeginOptions{Owner: "job-a", ClaimTTL: time.Second,
			LockTTL: time.Second, HistorySize: size, Known: known})
		if err != nil || b.Status != route.Acquired {
			t.Fatalf("begin = %+v, %v", b, err)
		}
		known = b.Head()
		for _, m := range batch {
			ids = append(ids, m.ID)
		}
		if err := s.EndBroadcast(ctx, b.Lock, ids[len(ids)-len(batch):], time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func (e *testEnv) history(t *testing.T, query string) (HistoryResponse, response) {
	t.Helper()
	r := e.do(t, http.MethodGet, "/logic/history?"+query, "", nil)
	var h HistoryResponse
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &h); err != nil {
			t.Fatalf("history body %s: %v", r.body, err)
		}
	}
	return h, r
}

func TestHistoryEndpoint(t *testing.T) {
	e := newEnv(t)
	room := testkit.Uniq("r")
	// 130 positions, the newest 100 kept: 31..130.
	ids := writeHistory(t, e, room, 130, 100)
	epoch := ""
	for _, c := range []struct {
		query    string
		from, to int
	}{
		{"", 81, 130},                    // the newest 50
		{"&limit=3", 128, 130},           // the newest 3
		{"&limit=1000", 31, 130},         // all kept
		{"&since=40&limit=5", 41, 45},    // the oldest after 40
		{"&since=100", 101, 130},         // up to the end
		{"&since=0&limit=2", 31, 32},     // from the start of the epoch: the oldest kept
		{"&since=5&limit=3", 31, 33},     // older than the kept range
		{"&since=130", 131, 130},         // up to date
		{"&since=9999&limit=1000", 1, 0}, // a position of another epoch
		{"&limit=1&since=129", 130, 130}, // either order
		{"&since=129&limit=50&x=1", 130, 130},
	} {
		h, r := e.history(t, "roomId="+room+c.query)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %v", c.query, errStatus(r))
		}
		if epoch == "" {
			epoch = h.Epoch
		}
		if h.RoomID != room || h.Epoch != epoch || epoch == "" || h.Pos != 130 {
			t.Fatalf("%s: %+v", c.query, h)
		}
		want := max(c.to-c.from+1, 0)
		if len(h.Messages) != want {
			t.Fatalf("%s: %d messages, want %d..%d", c.query, len(h.Messages), c.from, c.to)
		}
		for i, m := range h.Messages {
			p := c.from + i
			if m.Pos != int64(p) || m.ID != ids[p-1] || m.Content != "c "+ids[p-1] || m.Name != "tester" {
				t.Fatalf("%s: message %d = %+v, want pos %d id %s", c.query, i, m, p, ids[p-1])
			}
		}
	}

	// A room without history: 200, empty messages, epoch "" and pos 0.
	r := e.do(t, http.MethodGet, "/logic/history?roomId="+testkit.Uniq("r"), "", nil)
	if r.status != http.StatusOK || !json.Valid(r.body) {
		t.Fatalf("empty room: %v", errStatus(r))
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(r.body, &raw)
	if string(raw["epoch"]) != `""` || string(raw["pos"]) != "0" || string(raw["messages"]) != "[]" {
		t.Fatalf("empty room: %s", r.body)
	}
}

func TestHistoryEndpointRejects(t *testing.T) {
	e := newEnv(t)
	room := testkit.Uniq("r")
	for _, c := range []struct{ query, field string }{
		{"", "roomId"},
		{"roomId=", "roomId"},
		{"roomId=a%20b", "roomId"},
		{"roomId=" + room + "&since=-1", "since"},
		{"roomId=" + room + "&since=x", "since"},
		{"roomId=" + room + "&since=", "since"},
		{"roomId=" + room + "&limit=0", "limit"},
		{"roomId=" + room + "&limit=1001", "limit"},
		{"roomId=" + room + "&limit=2.5", "limit"},
	} {
		_, r := e.history(t, c.query)
		if r.status != http.StatusBadRequest {
			t.Fatalf("%q: %v", c.query, errStatus(r))
		}
		if eb := r.errorBody(t); eb.Code != "invalid_argument" || eb.Field != c.field {
			t.Fatalf("%q: error %+v, want field %s", c.query, eb, c.field)
		}
	}
	if r := e.do(t, http.MethodPost, "/logic/history?roomId="+room, "", nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %v", errStatus(r))
	}
}

// With Redis gone, the history answers 503 within the Redis timeout.
func TestHistoryEndpointRedisDown(t *testing.T) {
	srv, err := redisserver.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withRedis(srv.Addr), func(c *Config, _ *testEnv) { c.RedisTimeout = 300 * time.Millisecond })
	room := testkit.Uniq("r")
	writeHistory(t, e, room, 3, 10)
	if h, r := e.history(t, "roomId="+room); r.status != http.StatusOK || h.Pos != 3 || len(h.Messages) != 3 {
		t.Fatalf("before: %v %+v", errStatus(r), h)
	}
	srv.Stop()
	start := time.Now()
	_, r := e.history(t, "roomId="+room)
	if r.status != http.StatusServiceUnavailable || r.errorBody(t).Code != "unavailable" {
		t.Fatalf("Redis down: %v", errStatus(r))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("503 after %v", took)
	}
}
