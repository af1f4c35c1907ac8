package redisserver

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestStandaloneAndCluster(t *testing.T) {
	Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		// Keys on different slots must all work through the client.
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			if err := rdb.Set(ctx, "redisserver:"+k, k, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if _, ok := ClusterClient(t).(*redis.ClusterClient); !ok {
		t.Fatal("cluster client is not a *redis.ClusterClient")
	}
	n, err := ClusterClient(t).ClusterInfo(context.Background()).Result()
	if err != nil || len(n) == 0 {
		t.Fatalf("cluster info: %v", err)
	}
}

// A server of the test's own can be paused, killed and restarted empty on
// the same address, and a client reconnects to it.
func TestKillRestartPause(t *testing.T) {
	s := New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Get(tctx, "k").Err()
	cancel()
	if err == nil {
		t.Fatal("a paused server answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after resume: %q %v", v, err)
	}
	s.Kill()
	tctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = c.Ping(tctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a killed server answered")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("after restart: %v, want an empty server", err)
	}
}

// Slot agrees with CLUSTER KEYSLOT, hash tags included.
func TestSlot(t *testing.T) {
	rc := ClusterClient(t)
	for _, k := range []string{"a", "room:comets:{lobby}", "x{}y", "{user1000}:following", "foo{}{bar}", "{a}{b}", "123456789"} {
		want, err := rc.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := Slot(k); got != int(want) {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

// A master of a cluster with replicas killed: its replica is promoted with
// the data, and the old master restarted rejoins as a replica of it.
func TestClusterFailover(t *testing.T) {
	c := NewCluster(t, ClusterSpec{Masters: 3, Replicas: 1, NodeTimeout: time.Second})
	if len(c.Addrs) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Addrs))
	}
	ms, err := c.Masters()
	if err != nil || len(ms) != 3 {
		t.Fatalf("masters %v %v, want 3", ms, err)
	}
	ctx := context.Background()
	slot := Slot("k")
	old, err := c.Master(slot)
	if err != nil {
		t.Fatal(err)
	}
	direct := redis.NewClient(&redis.Options{Addr: old.Addr})
	defer direct.Close()
	if err := direct.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := direct.Wait(ctx, 1, time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	old.Kill()
	promoted, err := c.WaitPromoted(slot, old, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s promoted %v after the kill", promoted.Addr, time.Since(killed).Round(time.Millisecond))
	nc := redis.NewClient(&redis.Options{Addr: promoted.Addr})
	defer nc.Close()
	if v, err := nc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("promoted replica: %q %v, want the master's data", v, err)
	}
	if err := c.Rejoin(old, promoted, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Master(slot); err != nil || m != promoted {
		t.Fatalf("after the rejoin the master of slot %d is %v (%v), want %s", slot, m, err, promoted.Addr)
	}
	if v, err := direct.Get(ctx, "k").Result(); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
		t.Fatalf("old master answered %q %v, want MOVED: it is a replica now", v, err)
	}
}

// A test process that dies without stopping its servers (a panic, the
// -timeout kill) takes them with it: the orphan test starts one in a
// child process of the test binary and exits at once.
func TestServerDiesWithTestProcess(t *testing.T) {
	DiesWithTestProcess(t, func(t *testing.T) int {
		s, err := StartServer()
		if err != nil {
			t.Fatal(err)
		}
		return s.proc().Process.Pid
	})
}
