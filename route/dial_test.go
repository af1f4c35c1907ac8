package route_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// A Store over Dial's cluster client serves the slots of a killed master
// within half a second of its replica's promotion, for a script
// (BeginBroadcast) and a pipeline (Heads): the client reloads the slot map after calls that
// found no master, instead of waiting for a MOVED that a dead node never
// sends.
func TestDialFollowsFailover(t *testing.T) {
	c, rdb := dialCluster(t, redisserver.ClusterSpec{Masters: 3, Replicas: 1, NodeTimeout: time.Second})
	s := route.New(rdb)
	ctx := context.Background()
	room := testkit.Uniq("room-")
	old, err := c.Master(redisserver.Slot("{" + room + "}"))
	if err != nil {
		t.Fatal(err)
	}
	o := route.BeginOptions{Owner: "job1", LockTTL: time.Second}
	calls := func() error {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		b, err := s.BeginBroadcast(cctx, room, msgsOf(testkit.Uniq("m")), o)
		if err != nil {
			return fmt.Errorf("begin broadcast: %w", err)
		}
		if b.Status == route.Acquired {
			if err := s.ReleaseLock(cctx, b.Lock); err != nil {
				return fmt.Errorf("release lock: %w", err)
			}
		}
		if _, err := s.Heads(cctx, []string{room}); err != nil {
			return fmt.Errorf("heads: %w", err)
		}
		return nil
	}
	if err := calls(); err != nil {
		t.Fatal(err)
	}
	old.Kill()
	// Calls fail while the master is gone; each failure may reload the map.
	for i := 0; i < 5; i++ {
		if err := calls(); err == nil {
			t.Fatalf("call %d served with the master killed and no replica promoted yet", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.WaitPromoted(redisserver.Slot("{"+room+"}"), old, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	if err := testkit.Soon(500*time.Millisecond, calls); err != nil {
		t.Fatalf("calls still fail %v after the promotion: %v", time.Since(promoted).Round(time.Millisecond), err)
	}
	t.Logf("served %v after the promotion", time.Since(promoted).Round(time.Millisecond))
}

// dialCluster starts a cluster of spec and returns it with a client from
// Dial's defaults, closed when t ends.
func dialCluster(t testing.TB, spec redisserver.ClusterSpec) (*redisserver.Cluster, redis.UniversalClient) {
	c := redisserver.NewCluster(t, spec)
	cfg := config.DefaultRedis()
	cfg.Addrs = c.Addrs
	rdb := route.Dial(cfg)
	t.Cleanup(func() { rdb.Close() })
	return c, rdb
}

// A call to a Redis that refuses connections fails within a few hundred
// milliseconds (the call's own retries with backoff), not after the
// client's default redials (about 1.7 s), on a single server and a
// cluster's address list alike: a send's 503 and a /readyz answer do not
// wait for them.
func TestDialRefusedFailsFast(t *testing.T) {
	for name, addrs := range map[string][]string{
		"standalone": {testkit.FreeAddr(t)},
		"cluster":    {testkit.FreeAddr(t), testkit.FreeAddr(t)},
	} {
		t.Run(name, func(t *testing.T) {
			c := config.DefaultRedis()
			c.Addrs = addrs
			rdb := route.Dial(c)
			defer rdb.Close()
			for range 3 {
				began := time.Now()
				err := rdb.Ping(context.Background()).Err()
				if err == nil {
					t.Fatal("ping answered with nothing listening")
				}
				// Measured about 0.1 s; the client's default took 1.7 s.
				if d := time.Since(began); d > 700*time.Millisecond {
					t.Fatalf("a refused ping took %v: %v", d, err)
				}
			}
		})
	}
}
