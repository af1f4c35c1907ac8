package route_test

import (
	"context"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// A BeginBroadcast that timed out in a Redis stall runs when Redis resumes
// and holds the room's lock with its token; AbortBroadcast with that token
// releases the lock, and touches nothing that is not the failed attempt's.
// The claims stay: they hold the positions the script gave the messages in
// the history, and the retry gets the same positions back.
func TestAbortBroadcastAfterStall(t *testing.T) {
	srv, rdb := redisserver.Private(t)
	s := route.New(rdb)
	ctx := context.Background()
	room := testkit.Uniq("room")
	ids := []string{testkit.Uniq("m"), testkit.Uniq("m")}
	opts := route.BeginOptions{Owner: "a", ClaimTTL: time.Minute, LockTTL: time.Minute}
	// Load the script first, so the stalled call is one EVALSHA.
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	warm, err := s.BeginBroadcast(ctx, testkit.Uniq("room"), msgsOf(testkit.Uniq("m")), opts)
	if err != nil || warm.Status != route.Acquired {
		t.Fatal(warm, err)
	}

	resume := srv.PauseUntilResumed(t)
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	b, err := s.BeginBroadcast(sctx, room, msgsOf(ids...), opts)
	cancel()
	resume()
	if err == nil || b.Lock == nil || b.Lock.Room != room || b.Lock.Token == "" {
		t.Fatalf("begin in a stall = %+v, %v; want an error naming the attempt's lock", b, err)
	}
	// Once Redis answers, the stalled script has run: the room is locked
	// with the failed attempt's token.
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return s.Ping(ctx) })
	if got := rdb.Get(ctx, "lock:broadcast:{"+room+"}").Val(); got != b.Lock.Token {
		t.Fatalf("lock %q, want the stalled attempt's %q", got, b.Lock.Token)
	}
	// Other tokens release nothing.
	if ok, n, err := s.AbortBroadcast(ctx, room, "a", []string{"other"}, ids); ok || n != 0 || err != nil {
		t.Fatalf("abort with a foreign token = %v %d %v", ok, n, err)
	}
	ok, n, err := s.AbortBroadcast(ctx, room, "a", []string{"older", b.Lock.Token}, ids)
	if !ok || n != 0 || err != nil {
		t.Fatalf("abort = %v %d %v; want true 0 nil", ok, n, err)
	}
	if c := rdb.Exists(ctx, "lock:broadcast:{"+room+"}").Val(); c != 0 {
		t.Fatalf("lock left after abort")
	}
	// The room broadcasts again at once, with the positions the stalled
	// attempt gave; an abort with the old token does not touch the new
	// attempt's lock or claims.
	b2, err := s.BeginBroadcast(ctx, room, msgsOf(ids...), opts)
	if err != nil || b2.Status != route.Acquired || b2.States[0] != route.Positioned || b2.Pos[0] != 1 || b2.Pos[1] != 2 || b2.Last != 2 {
		t.Fatalf("begin after abort = %+v, %v", b2, err)
	}
	if ok, _, err := s.AbortBroadcast(ctx, room, "a", []string{b.Lock.Token}, ids); ok || err != nil {
		t.Fatalf("stale abort released a live attempt: %v %v", ok, err)
	}
	if c := rdb.Exists(ctx, "lock:broadcast:{"+room+"}", "msg:processed:{"+room+"}:"+ids[0]).Val(); c != 2 {
		t.Fatalf("live attempt's lock and claim: %d of 2 left", c)
	}
}
