package route_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// BeginBroadcast with Replicas 1 answers once the replica of the room's
// master holds the positions it gave. With that replica stopped (SIGSTOP)
// it fails within about ReplicaTimeout and hands back the lock's token,
// where a call without Replicas hands out positions only the master holds
// (a failover then loses them). Once the replica is back, the retry gets
// the same position and the replica holds it.
func TestBeginWaitsForReplica(t *testing.T) {
	c, rdb := dialCluster(t, redisserver.ClusterSpec{Masters: 3, Replicas: 1, NodeTimeout: 5 * time.Second})
	s := route.New(rdb)
	ctx := context.Background()
	tl := newTimeline(t, rdb, 100, time.Minute)
	var master, replica *redisserver.Server
	testkit.SucceedsSoon(t, 10*time.Second, func() (err error) {
		// A node the loaded machine kept from answering in time may have
		// been failed over just after the start: ask until it settles.
		if master, err = c.Master(redisserver.Slot("{" + tl.room + "}")); err != nil {
			return err
		}
		replica, err = c.ReplicaOf(master)
		return err
	})
	onReplica := replicaHistory(t, replica.Addr, tl.room)

	// Acknowledged calls get a bound a loaded machine keeps; the call
	// with the replica stopped a short one, to time its failure.
	const wait = 500 * time.Millisecond
	tl.opts.Replicas, tl.opts.ReplicaTimeout = 1, 5*time.Second
	if b := tl.batch(msgsOf("m1")); b.Pos[0] != 1 {
		t.Fatalf("first message at %v, want 1", b.Pos)
	}
	if n := onReplica(); n != 1 {
		t.Fatalf("replica holds %d history entries after an acknowledged begin, want 1", n)
	}

	resume := replica.PauseUntilResumed(t)
	short := tl.opts
	short.ReplicaTimeout = wait
	start := time.Now()
	b, err := s.BeginBroadcast(ctx, tl.room, msgsOf("m2"), short)
	took := time.Since(start)
	var de *danmaku.Error
	if err == nil || !errors.As(err, &de) || de.Code != danmaku.EUNAVAILABLE || b.Lock == nil {
		t.Fatalf("begin with the replica stopped = %+v, %v; want EUNAVAILABLE with the lock's token", b, err)
	}
	if took < wait || took > wait+2*time.Second {
		t.Fatalf("begin with the replica stopped failed after %v, want about %v", took, wait)
	}
	// Without Replicas the same call would go ahead on the master alone.
	noWait := tl.opts
	noWait.Replicas = 0
	if released, _, err := s.AbortBroadcast(ctx, tl.room, "job-a", []string{b.Lock.Token}, nil); !released || err != nil {
		t.Fatalf("abort the unreplicated attempt: %v %v", released, err)
	}
	if b, err := s.BeginBroadcast(ctx, tl.room, msgsOf("m2"), noWait); err != nil || b.Status != route.Acquired || b.Pos[0] != 2 {
		t.Fatalf("begin without Replicas, replica stopped = %+v, %v; want Acquired at 2 on the master alone", b, err)
	} else if released, _, err := s.AbortBroadcast(ctx, tl.room, "job-a", []string{b.Lock.Token}, nil); !released || err != nil {
		t.Fatalf("abort: %v %v", released, err)
	}

	resume()
	b = tl.batch(msgsOf("m2"))
	if b.Pos[0] != 2 || b.States[0] != route.Positioned {
		t.Fatalf("retry after the replica came back = %+v; want m2 at its position 2", b)
	}
	if n := onReplica(); n != 2 {
		t.Fatalf("replica holds %d history entries after the retry, want 2", n)
	}
}

// replicaHistory returns a reader of the length of room's history on the
// replica at addr.
func replicaHistory(t *testing.T, addr, room string) func() int64 {
	rc := redis.NewClient(&redis.Options{Addr: addr, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
		return cn.ReadOnly(ctx).Err()
	}})
	t.Cleanup(func() { rc.Close() })
	return func() int64 {
		t.Helper()
		n, err := rc.LLen(context.Background(), "room:history:{"+room+"}").Result()
		if err != nil {
			t.Fatalf("history on the replica: %v", err)
		}
		return n
	}
}

// BenchmarkBeginReplicas measures BeginBroadcast of a 20-message batch and
// the lock's release on a cluster with a replica per master, without and
// with waiting for the replica (WAIT 1 on the script's connection).
func BenchmarkBeginReplicas(b *testing.B) {
	_, rdb := dialCluster(b, redisserver.ClusterSpec{Masters: 3, Replicas: 1, NodeTimeout: 5 * time.Second})
	s := route.New(rdb)
	ctx := context.Background()
	for _, n := range []int{0, 1} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			room := testkit.Uniq("room")
			o := route.BeginOptions{Owner: "job-a", LockTTL: 5 * time.Second, Replicas: n, ReplicaTimeout: 5 * time.Second}
			ids := make([]string, 20)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range ids {
					ids[k] = fmt.Sprintf("m%d-%d", i, k)
				}
				msgs := msgsOf(ids...)
				bg, err := s.BeginBroadcast(ctx, room, msgs, o)
				if err != nil || bg.Status != route.Acquired {
					b.Fatal(bg.Status, err)
				}
				if err := s.ReleaseLock(ctx, bg.Lock); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
		})
	}
}
