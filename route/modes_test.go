package route_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

// A room's settings start off at version 0; every change keeps the fields
// it does not name and takes the next version, also when moderators
// change the room at once; on a single server and on a cluster.
func TestRoomState(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		room := testkit.Uniq("room")
		if st, err := s.RoomState(ctx, room); err != nil || st != (danmaku.RoomState{}) {
			t.Fatalf("a room never set: %+v %v", st, err)
		}
		slow, on := 30, true
		st, err := s.SetRoomState(ctx, room, route.StatePatch{SlowSeconds: &slow, MembersOnly: &on})
		if want := (danmaku.RoomState{Ver: 1, SlowSeconds: 30, MembersOnly: true}); err != nil || st != want {
			t.Fatalf("set: %+v %v, want %+v", st, err, want)
		}
		uniq, off := 5, false
		st, err = s.SetRoomState(ctx, room, route.StatePatch{UniqueSeconds: &uniq, MembersOnly: &off})
		if want := (danmaku.RoomState{Ver: 2, SlowSeconds: 30, UniqueSeconds: 5}); err != nil || st != want {
			t.Fatalf("patch: %+v %v, want %+v", st, err, want)
		}
		if got, err := s.RoomState(ctx, room); err != nil || got != st {
			t.Fatalf("read back: %+v %v, want %+v", got, err, st)
		}
		var wg sync.WaitGroup
		vers := make([]int64, 20)
		for i := range vers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := s.SetRoomState(ctx, room, route.StatePatch{SlowSeconds: &i})
				if err != nil {
					t.Error(err)
				}
				vers[i] = st.Ver
			}()
		}
		wg.Wait()
		seen := map[int64]bool{}
		for _, v := range vers {
			if v < 3 || v > 22 || seen[v] {
				t.Fatalf("concurrent changes got versions %v", vers)
			}
			seen[v] = true
		}
		if _, err := s.RoomState(ctx, "bad:room"); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("bad room: %v", err)
		}
	})
}

// Slow mode refuses a user's second send within the interval (with what
// it still lasts) and not another user's, and lets the user send again
// after it; unique chat refuses a content repeated within its interval, in
// the same send or a later one, from any user; a refusal marks nothing.
func TestPace(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		room := testkit.Uniq("room")
		check := func(user string, slow, uniq time.Duration, plain ...string) route.PaceVerdict {
			t.Helper()
			v, err := s.CheckPace(ctx, route.Pace{Room: room, User: user, Slow: slow, Unique: uniq, Plain: plain})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		const slow = 400 * time.Millisecond
		if v := check("1", slow, 0, "hello"); !v.Allowed() {
			t.Fatalf("first send: %+v", v)
		}
		if v := check("1", slow, 0, "again"); v.Allowed() || v.Wait <= 200*time.Millisecond || v.Wait > slow {
			t.Fatalf("second send within the interval: %+v", v)
		}
		if v := check("2", slow, 0, "hello"); !v.Allowed() {
			t.Fatalf("another user: %+v", v)
		}
		time.Sleep(slow + 50*time.Millisecond)
		if v := check("1", slow, 0, "later"); !v.Allowed() {
			t.Fatalf("after the interval: %+v", v)
		}

		const uniq = 400 * time.Millisecond
		if v := check("3", 0, uniq, "gg", "nice"); !v.Allowed() {
			t.Fatalf("first contents: %+v", v)
		}
		if v := check("4", 0, uniq, "new", "nice"); v.Repeat != 1 {
			t.Fatalf("a repeat from another user: %+v", v)
		}
		if v := check("4", 0, uniq, "new"); !v.Allowed() {
			t.Fatalf("the refused send marked its new content: %+v", v)
		}
		if v := check("5", 0, uniq, "x", "y", "x"); v.Repeat != 2 {
			t.Fatalf("a repeat within one send: %+v", v)
		}
		// Slow mode refuses first and marks nothing of unique chat.
		check("6", slow, 0, "z")
		if v := check("6", slow, uniq, "fresh"); v.Wait <= 0 {
			t.Fatalf("slow and unique: %+v", v)
		}
		if v := check("7", 0, uniq, "fresh"); !v.Allowed() {
			t.Fatalf("a slow-mode refusal marked its content: %+v", v)
		}
		time.Sleep(uniq + 50*time.Millisecond)
		if v := check("3", 0, uniq, "gg"); !v.Allowed() {
			t.Fatalf("after the unique interval: %+v", v)
		}
	})
}
