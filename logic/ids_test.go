package logic

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

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
