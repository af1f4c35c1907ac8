package route_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// A claim is final: the dedup key holds the message's epoch and position
// for the claim TTL. A job that dies after BeginBroadcast leaves it, and the
// redelivery gets the same positions back (Positioned) instead of new ones;
// so does a client's second send of the same id. The timeline moves only
// for messages new to it.
func TestRedeliveryKeepsPositions(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room := testkit.Uniq("room")
		dying := route.BeginOptions{Owner: "job-a", ClaimTTL: time.Minute, LockTTL: 100 * time.Millisecond}
		var out handedOut

		a, err := s.BeginBroadcast(ctx, room, msgsOf("m1", "m2", "m3"), dying)
		if err != nil || a.Status != route.Acquired || a.Last != 3 {
			t.Fatal(a, err)
		}
		out.add(t, a, msgsOf("m1", "m2", "m3"))
		key := "msg:processed:{" + room + "}:m2"
		if v := rdb.Get(ctx, key).Val(); v != "pos:"+a.Epoch+":2" {
			t.Fatalf("claim of m2 = %q", v)
		}
		within(t, "claim PTTL", pttl(t, rdb, key), 59*time.Second, time.Minute)
		// job-a dies here: no push, no release; its lock expires.
		testkit.SucceedsSoon(t, 2*time.Second, func() error {
			if rdb.Exists(ctx, "lock:broadcast:{"+room+"}").Val() != 0 {
				return errors.New("lock still held")
			}
			return nil
		})

		next := route.BeginOptions{Owner: "job-b", ClaimTTL: time.Minute, LockTTL: time.Second, Known: route.Head{}}
		redo := msgsOf("m1", "m2", "m3", "m4")
		b, err := s.BeginBroadcast(ctx, room, redo, next)
		if err != nil || b.Status != route.Acquired || b.Epoch != a.Epoch || b.Last != 4 {
			t.Fatalf("redelivery = %+v, %v", b, err)
		}
		wantStates := []route.ClaimState{route.Positioned, route.Positioned, route.Positioned, route.Claimed}
		for i, p := range []int64{1, 2, 3, 4} {
			if b.Pos[i] != p || b.States[i] != wantStates[i] {
				t.Fatalf("redelivery: states %v positions %v", b.States, b.Pos)
			}
		}
		out.add(t, b, redo)
		if err := s.ReleaseLock(ctx, b.Lock); err != nil {
			t.Fatal(err)
		}

		// A client's second send of m2, alone: its position again, nothing
		// new in the history.
		c, err := s.BeginBroadcast(ctx, room, msgsOf("m2"), next)
		if err != nil || c.Status != route.Acquired || c.States[0] != route.Positioned || c.Pos[0] != 2 || c.Last != 4 {
			t.Fatalf("second send = %+v, %v", c, err)
		}
		if err := s.ReleaseLock(ctx, c.Lock); err != nil {
			t.Fatal(err)
		}
		if n := out.check(t, s, room); n != 4 {
			t.Fatalf("%d positions checked, want 4", n)
		}
		if h := rdb.LLen(ctx, "room:history:{"+room+"}").Val(); h != 4 {
			t.Fatalf("history holds %d messages, want 4 (one per message)", h)
		}
	})
}

// A claim of an epoch that ended (the timeline was lost while the dedup
// key survived), or of a position the timeline no longer reaches, is
// claimed again; with Redis emptied the key is gone too and the message is
// new.
func TestClaimOfEndedEpochIsClaimedAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room := testkit.Uniq("room")
		o := route.BeginOptions{Owner: "job-a", LockTTL: time.Second}
		a, err := s.BeginBroadcast(ctx, room, msgsOf("m1", "m2"), o)
		if err != nil || a.Status != route.Acquired {
			t.Fatal(a, err)
		}
		s.ReleaseLock(ctx, a.Lock)
		rdb.Del(ctx, "room:timeline:{"+room+"}", "room:history:{"+room+"}")
		b, err := s.BeginBroadcast(ctx, room, msgsOf("m2", "m3"), o)
		if err != nil || b.Status != route.Acquired || b.Epoch == a.Epoch ||
			b.States[0] != route.Claimed || b.Pos[0] != 1 || b.Pos[1] != 2 || b.Last != 2 {
			t.Fatalf("after the timeline was lost = %+v, %v (old epoch %s)", b, err, a.Epoch)
		}
		if v := rdb.Get(ctx, "msg:processed:{"+room+"}:m2").Val(); v != "pos:"+b.Epoch+":1" {
			t.Fatalf("claim of m2 = %q", v)
		}
		s.ReleaseLock(ctx, b.Lock)
		// The timeline went back in the same epoch (writes lost, and the
		// caller knows no head): a claim beyond the stored seq is no
		// position the history can serve, and is claimed again.
		rdb.HSet(ctx, "room:timeline:{"+room+"}", "seq", 1)
		rdb.RPop(ctx, "room:history:{"+room+"}")
		c, err := s.BeginBroadcast(ctx, room, msgsOf("m2", "m3"), o)
		if err != nil || c.Status != route.Acquired || c.Epoch != b.Epoch ||
			c.States[0] != route.Positioned || c.Pos[0] != 1 || c.States[1] != route.Claimed || c.Pos[1] != 2 || c.Last != 2 {
			t.Fatalf("after the timeline went back = %+v, %v", c, err)
		}
	})
}

// The Redis cost of one room batch as job runs it (BeginBroadcast, then
// ReleaseLock), counted by the server with the commands its scripts run:
// one SET per message, and a fixed 13 per batch (the two script calls, the
// lock's SET, GET and DEL, the window's SET, the timeline's HMGET, HSET and
// two PEXPIREs, one RPUSH, the routes' HGETALL and the settings version's
// HGET).
func TestBroadcastCommandsPerMessage(t *testing.T) {
	_, rdb := redisserver.Private(t)
	s := route.New(rdb)
	ctx := context.Background()
	room := testkit.Uniq("room")
	o := route.BeginOptions{Window: time.Second, Owner: "job-a", LockTTL: time.Second}
	warm, err := s.BeginBroadcast(ctx, testkit.Uniq("room"), msgsOf("w"), o)
	if err != nil || s.ReleaseLock(ctx, warm.Lock) != nil {
		t.Fatal(err) // loads the scripts: EVALSHA from now on
	}
	first, err := s.BeginBroadcast(ctx, room, msgsOf("first"), o)
	if err != nil || s.ReleaseLock(ctx, first.Lock) != nil {
		t.Fatal(err) // starts the room's epoch
	}
	for _, n := range []int{1, 100} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = testkit.Uniq("m")
		}
		rdb.Del(ctx, "room:cooldown:{"+room+"}") // the window of the batch before
		before := redisserver.Commands(t, rdb)
		b, err := s.BeginBroadcast(ctx, room, msgsOf(ids...), o)
		if err != nil || b.Status != route.Acquired || b.Pos[n-1] != b.Last {
			t.Fatal(b, err)
		}
		if err := s.ReleaseLock(ctx, b.Lock); err != nil {
			t.Fatal(err)
		}
		if got := redisserver.Commands(t, rdb) - before; got != int64(n)+13 {
			t.Fatalf("%d commands for a batch of %d messages, want %d", got, n, n+13)
		}
	}
}
