package redistest

import (
	"context"
	"os"
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
			if err := rdb.Set(ctx, "redistest:"+k, k, 0).Err(); err != nil {
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
