package logic

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

func TestIDGen(t *testing.T) {
	now := time.UnixMilli(1_763_000_000_000)
	g := newIDGen(513)
	g.now = func() time.Time { return now }

	var ids []string
	for i := 0; i < 70_000; i++ { // more than one millisecond's sequence
		ids = append(ids, g.next())
	}
	now = now.Add(-time.Hour) // clock steps back
	ids = append(ids, g.next())
	now = now.Add(2 * time.Hour)
	ids = append(ids, g.next())

	if !sort.StringsAreSorted(ids) {
		t.Fatal("ids are not increasing")
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		if len(id) != idLen || strings.Contains(id, "-") || danmaku.CheckID("id", id) != nil {
			t.Fatalf("bad id %q", id)
		}
	}
	if ts, ok := idTime(ids[0]); !ok || !ts.Equal(time.UnixMilli(1_763_000_000_000)) {
		t.Fatalf("idTime(first) = %v, %v", ts, ok)
	}
	// 70,000 ids overflow one millisecond's 65,536 sequence numbers.
	if ts, _ := idTime(ids[69_999]); ts.UnixMilli() != 1_763_000_000_001 {
		t.Fatalf("after overflow ts = %d, want the next millisecond", ts.UnixMilli())
	}
	if ts, _ := idTime(ids[len(ids)-1]); !ts.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("idTime(last) = %v, want %v", ts, now)
	}
	// Two nodes in the same millisecond never collide.
	h := newIDGen(514)
	h.now = g.now
	if a, b := g.next(), h.next(); a == b {
		t.Fatalf("nodes 513 and 514 both made %q", a)
	}
}

func TestClientMsgID(t *testing.T) {
	for _, tc := range []struct {
		uid      int64
		in, want string
		ok       bool
	}{
		{7, "abc", "u7-abc", true},
		{7, "u7-abc", "u7-abc", true},
		{7, "u8-abc", "u7-u8-abc", true},
		{7, "u7-", "u7-u7-", true},
		{1<<63 - 1, strings.Repeat("k", MaxClientIDLen), "u9223372036854775807-" + strings.Repeat("k", MaxClientIDLen), true},
		{1<<63 - 1, strings.Repeat("k", 44), "", false},
		{7, "a:b", "", false},
		{7, "", "", false},
	} {
		got, err := clientMsgID("f", tc.uid, tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("clientMsgID(%d, %q) = %q, %v; want %q ok=%v", tc.uid, tc.in, got, err, tc.want, tc.ok)
		}
		if err == nil && danmaku.CheckID("id", got) != nil {
			t.Errorf("clientMsgID(%d, %q) = %q is not a valid id", tc.uid, tc.in, got)
		}
	}
}

// A broker that accepts connections but never answers must not hang a
// request: the produce timeout bounds it.
func TestKafkaBlackhole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	cfg := DefaultConfig()
	cfg.ProduceTimeout = 300 * time.Millisecond
	kc := config.DefaultKafka()
	kc.Brokers = []string{ln.Addr().String()}
	rdb := newRedis(redisserver.Standalone(t).Addr)
	defer rdb.Close()
	srv, err := New(cfg, Deps{Store: route.New(rdb), Kafka: kc})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	e := &testEnv{url: hs.URL}
	start := time.Now()
	r := e.send(t, sendReq("blackhole", newUser(), "x"))
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("503 after %v, want about %v", took, cfg.ProduceTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := srv.Ready(ctx); danmaku.ErrorCode(err) != danmaku.EUNAVAILABLE {
		t.Fatalf("Ready = %v, want unavailable", err)
	}
}

// The msgId limit depends on the user id's prefix; the error names it.
func TestMsgIDLimitNamed(t *testing.T) {
	e := newEnv(t)
	r := sendReq("msgid_limit", 7, "x")
	r.Messages[0].MsgID = repeat("k", 61) // "u7-" + 61 = 64
	if resp := e.send(t, r); resp.status != http.StatusAccepted {
		t.Fatalf("61 characters for user 7: %d %s", resp.status, resp.body)
	}
	r.Messages[0].MsgID = repeat("k", 62)
	resp := e.send(t, r)
	if resp.status != http.StatusBadRequest || !strings.Contains(resp.errorBody(t).Message, "longer than 61 characters") {
		t.Fatalf("62 characters for user 7: %d %s", resp.status, resp.body)
	}
}
