package route_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

// handedOut records every position BeginBroadcast returned, as comets would
// have been given them, and checks the timeline's crash guarantee: a
// position handed out is in the history with the message it was given to,
// or its epoch is no longer the room's; no position of an epoch is handed
// out twice.
type handedOut struct {
	mu  sync.Mutex
	ids map[route.Head]string // (epoch, pos) -> message id
}

func (h *handedOut) add(t *testing.T, b route.Begin, msgs []danmaku.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids == nil {
		h.ids = map[route.Head]string{}
	}
	for i, p := range b.Pos {
		if p == 0 {
			continue
		}
		k := route.Head{Epoch: b.Epoch, Last: p}
		if id, dup := h.ids[k]; dup && id != msgs[i].ID {
			t.Errorf("position %d of epoch %s handed out twice: %s and %s", p, b.Epoch, id, msgs[i].ID)
		}
		h.ids[k] = msgs[i].ID
	}
}

// check reads the whole history of room and compares.
func (h *handedOut) check(t *testing.T, s *route.Store, room string) (current int) {
	t.Helper()
	hist, err := s.History(context.Background(), room, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if hist.First != 1 {
		t.Fatalf("history starts at %d; size the test's history to keep everything", hist.First)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, id := range h.ids {
		if k.Epoch != hist.Epoch {
			continue // the epoch changed: viewers start over
		}
		current++
		if k.Last > hist.Last || hist.Msgs[k.Last-1].ID != id {
			t.Fatalf("position %d (%s) handed out but not readable: history has %d positions", k.Last, id, hist.Last)
		}
	}
	return current
}

// A job that dies after BeginBroadcast never ends the broadcast; its lock
// and claims expire and the next job redelivers the same messages. Every
// position either of them was given stays readable.
func TestCrashAfterBeginLeavesEveryPositionReadable(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room := testkit.Uniq("room")
		short := route.BeginOptions{Owner: "job-a", ClaimTTL: 200 * time.Millisecond, LockTTL: 200 * time.Millisecond}
		var out handedOut

		a, err := s.BeginBroadcast(ctx, room, msgsOf("m1", "m2", "m3"), short)
		if err != nil || a.Status != route.Acquired {
			t.Fatal(a, err)
		}
		out.add(t, a, msgsOf("m1", "m2", "m3"))
		// job-a dies here: no EndBroadcast, no release.

		next := route.BeginOptions{Owner: "job-b", ClaimTTL: time.Second, LockTTL: time.Second}
		if b, err := s.BeginBroadcast(ctx, room, msgsOf("m1", "m2", "m3", "m4"), next); err != nil || b.Status != route.LockedElsewhere || b.Pos != nil {
			t.Fatalf("begin while the dead job's lock holds = %+v, %v", b, err)
		}
		testkit.SucceedsSoon(t, 2*time.Second, func() error {
			if rdb.Exists(ctx, "lock:broadcast:{"+room+"}").Val() != 0 {
				return fmt.Errorf("lock still held")
			}
			return nil
		})
		time.Sleep(50 * time.Millisecond) // the claims were set before the lock
		redo := msgsOf("m1", "m2", "m3", "m4")
		b, err := s.BeginBroadcast(ctx, room, redo, next)
		if err != nil || b.Status != route.Acquired || b.Epoch != a.Epoch || b.Pos[0] != 4 || b.Pos[3] != 7 {
			t.Fatalf("redelivery = %+v, %v", b, err)
		}
		out.add(t, b, redo)
		if err := s.EndBroadcast(ctx, b.Lock, []string{"m1", "m2", "m3", "m4"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		// A later redelivery of "done" ids gets no positions.
		again := msgsOf("m1", "m2", "m5")
		c, err := s.BeginBroadcast(ctx, room, again, next)
		if err != nil || c.Status != route.Acquired || c.Pos[0] != 0 || c.Pos[1] != 0 || c.Pos[2] != 8 {
			t.Fatalf("begin with done ids = %+v, %v", c, err)
		}
		out.add(t, c, again)
		if n := out.check(t, s, room); n != 8 {
			t.Fatalf("%d positions checked, want 8", n)
		}
	})
}

// Several jobs broadcast one room at once, each dying after BeginBroadcast
// now and then (no EndBroadcast, the lock left to expire), while the
// timeline is lost once. Every position handed out is readable unless its
// epoch ended, and none is handed out twice.
func TestCrashesAtRandomLeaveEveryPositionReadable(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room := testkit.Uniq("room")
		var out handedOut
		var wg sync.WaitGroup
		for j := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(j), 7))
				o := route.BeginOptions{Owner: fmt.Sprintf("job-%d", j), ClaimTTL: 60 * time.Millisecond,
					LockTTL: 40 * time.Millisecond, HistorySize: 100000}
				for i := range 40 {
					if j == 0 && i == 20 {
						rdb.Del(ctx, "room:timeline:{"+room+"}") // the timeline is lost
					}
					ids := make([]string, 1+rng.IntN(4))
					for k := range ids {
						ids[k] = fmt.Sprintf("m%d", rng.IntN(120))
					}
					msgs := msgsOf(distinctIDs(ids)...)
					b, err := s.BeginBroadcast(ctx, room, msgs, o)
					if err != nil {
						t.Error(err)
						return
					}
					if b.Status != route.Acquired {
						time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
						continue
					}
					out.add(t, b, msgs)
					o.Known = b.Head()
					if rng.IntN(3) == 0 {
						o.Known = route.Head{} // dies after Begin; the next incarnation knows nothing
						continue
					}
					var claimed []string
					for k, st := range b.States {
						if st == route.Claimed {
							claimed = append(claimed, msgs[k].ID)
						}
					}
					if err := s.EndBroadcast(ctx, b.Lock, claimed, time.Minute); err != nil && err != route.ErrNotHolder {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if n := out.check(t, s, room); n == 0 {
			t.Fatal("no position of the current epoch was handed out; the test checked nothing")
		}
	})
}

func distinctIDs(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
