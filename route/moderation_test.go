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

// A ban refuses the user's registration in the room (and only that room)
// and the user's sends to it, ends with its duration, and Unban lifts it;
// on a single server and on a cluster.
func TestBan(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room, other, user := testkit.Uniq("room"), testkit.Uniq("room"), testkit.Uniq("u")
		bucket := route.Bucket{Rate: 100, Burst: 100}
		admit := func(room string) route.Verdict {
			t.Helper()
			v, err := s.Admit(ctx, route.Admission{User: user, Room: room, N: 10, UserBucket: bucket,
				IP: "192.0.2.9", IPBucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		conn := func(room string) route.Conn {
			return route.Conn{ID: testkit.Uniq("c"), Room: room, User: user, Comet: "comet-a"}
		}
		if err := s.Ban(ctx, user, room, 1500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		c := conn(room)
		var be *route.BanError
		if err := s.Register(ctx, c); !errors.As(err, &be) || be.Room != room || be.User != user ||
			be.Left <= time.Second || be.Left > 1500*time.Millisecond {
			t.Fatalf("register while banned: %v", err)
		}
		if n, _ := s.Online(ctx, room); n != 0 {
			t.Fatalf("a banned user was counted in the room: %d", n)
		}
		// Anonymous viewers and other rooms are not concerned.
		if err := s.Register(ctx, route.Conn{ID: testkit.Uniq("c"), Room: room, Comet: "comet-a"}); err != nil {
			t.Fatalf("anonymous viewer: %v", err)
		}
		if err := s.Register(ctx, conn(other)); err != nil {
			t.Fatalf("other room: %v", err)
		}
		if v := admit(room); !v.Banned || v.RetryAfter <= time.Second {
			t.Fatalf("send while banned: %+v", v)
		}
		if v := admit(other); !v.Allowed {
			t.Fatalf("send to another room: %+v", v)
		}
		// The refused send took no tokens: the other room's send above and
		// nine more of ten fit the burst of 100.
		for range 9 {
			if v := admit(other); !v.Allowed {
				t.Fatalf("the banned send took tokens: %+v", v)
			}
		}
		banKey := "room:ban:{" + room + "}:" + user
		if d := pttl(t, rdb, banKey); d <= 0 {
			t.Fatalf("ban PTTL %v", d)
		}
		// Allowed again once the duration passed.
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			if err := s.Register(ctx, conn(room)); err != nil {
				return err
			}
			return nil
		})
		if d := pttl(t, rdb, banKey); d > 0 {
			t.Fatalf("ban left %v after it ended", d)
		}
		// Unban lifts a ban at once.
		if err := s.Ban(ctx, user, room, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.Register(ctx, conn(room)); !errors.As(err, &be) {
			t.Fatalf("register after a new ban: %v", err)
		}
		if ok, err := s.Unban(ctx, user, room); !ok || err != nil {
			t.Fatalf("unban: %v %v", ok, err)
		}
		if ok, _ := s.Unban(ctx, user, room); ok {
			t.Fatal("a second unban found a ban")
		}
		if err := s.Register(ctx, conn(room)); err != nil {
			t.Fatalf("register after unban: %v", err)
		}
		if err := s.Ban(ctx, user, "a:b", time.Hour); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("bad room: %v", err)
		}
	})
}

// A del event turns every element of the deleted ids into a tombstone in
// its place: positions do not move, History returns the tombstones with
// Deleted set and Visible leaves them out; the event is claimed like a
// message, so it runs once, and it waits for a lock held elsewhere.
func TestBeginEventDeletes(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		tl := newTimeline(t, rdb, 100, time.Minute)
		tl.batch(tl.fresh(5))
		// m0003 delivered again under a new position (a redelivery).
		b, err := tl.s.BeginBroadcast(ctx, tl.room, msgsOf("m0003"), route.BeginOptions{Owner: "job-b",
			ClaimTTL: time.Second, LockTTL: time.Second, HistorySize: 100, HistoryTTL: time.Minute})
		if err != nil || b.Status != route.NoneClaimable {
			t.Fatalf("redelivery of a done id: %+v %v", b, err)
		}
		rdb.Del(ctx, "msg:processed:{"+tl.room+"}:m0003")
		tl.batch(msgsOf("m0003"))
		tl.batch(tl.fresh(1)) // m0006 at 7

		opts := route.EventOptions{Owner: "job-a", ClaimTTL: 5 * time.Second, LockTTL: 5 * time.Second}
		ev := danmaku.Event{Op: danmaku.OpDel, Room: tl.room, ID: testkit.Uniq("ev"), IDs: []string{"m0003", "m0005", "nope"}}
		// Another owner's ban event holds the room's lock.
		other := danmaku.Event{Op: danmaku.OpBan, Room: tl.room, ID: testkit.Uniq("ev"), User: "u1", Until: 1}
		held, err := tl.s.BeginEvent(ctx, other, route.EventOptions{Owner: "job-b", ClaimTTL: time.Minute, LockTTL: time.Minute})
		if err != nil || held.Status != route.Acquired {
			t.Fatalf("ban event: %+v %v", held, err)
		}
		if b, err := tl.s.BeginEvent(ctx, ev, opts); err != nil || b.Status != route.LockedElsewhere {
			t.Fatalf("with the lock held elsewhere: %+v %v", b, err)
		}
		if err := tl.s.EndBroadcast(ctx, held.Lock, []string{other.ID}, time.Minute); err != nil {
			t.Fatal(err)
		}
		b, err = tl.s.BeginEvent(ctx, ev, opts)
		if err != nil || b.Status != route.Acquired || b.Lock == nil || b.Tombstoned != 3 {
			t.Fatalf("begin del = %+v, %v; want acquired, 3 tombstones", b, err)
		}
		if err := tl.s.EndBroadcast(ctx, b.Lock, []string{ev.ID}, time.Minute); err != nil {
			t.Fatal(err)
		}
		h := tl.history(0, 100)
		if h.Last != 7 || h.First != 1 || len(h.Msgs) != 7 {
			t.Fatalf("history after delete: %+v", h)
		}
		deleted := map[int64]string{3: "m0003", 5: "m0005", 6: "m0003"}
		for i, m := range h.Msgs {
			p := int64(i + 1)
			if id, del := deleted[p]; del {
				if m != (danmaku.Message{ID: id, Pos: p, Deleted: true}) {
					t.Fatalf("position %d: %+v, want the tombstone of %s", p, m, id)
				}
			} else if m.Pos != p || m.Deleted || m.Content != "c-"+m.ID {
				t.Fatalf("position %d: %+v", p, m)
			}
		}
		var ids []string
		for _, m := range h.Visible() {
			ids = append(ids, m.ID)
		}
		if got := fmt.Sprint(ids); got != "[m0001 m0002 m0004 m0006]" {
			t.Fatalf("visible: %s", got)
		}
		// The same event again is a duplicate; a new one finds nothing new.
		if b, err := tl.s.BeginEvent(ctx, ev, opts); err != nil || b.Status != route.NoneClaimable || b.States[0] != route.Processed {
			t.Fatalf("the event again: %+v %v", b, err)
		}
		ev.ID = testkit.Uniq("ev")
		b, err = tl.s.BeginEvent(ctx, ev, opts)
		if err != nil || b.Status != route.Acquired || b.Tombstoned != 0 {
			t.Fatalf("a new event deleting the same ids: %+v %v", b, err)
		}
		tl.s.ReleaseLock(ctx, b.Lock)
		// Later messages continue after the deleted positions.
		if b := tl.batch(tl.fresh(1)); b.Pos[0] != 8 {
			t.Fatalf("next position %d, want 8", b.Pos[0])
		}
		// A ban event claims and locks, and touches no history.
		ban := danmaku.Event{Op: danmaku.OpBan, Room: tl.room, ID: testkit.Uniq("ev"), User: "42", Until: 1}
		b, err = tl.s.BeginEvent(ctx, ban, opts)
		if err != nil || b.Status != route.Acquired || b.Tombstoned != 0 {
			t.Fatalf("ban event: %+v %v", b, err)
		}
		tl.s.ReleaseLock(ctx, b.Lock)
	})
}

// Every del event appends its ids to the room's deletion log and counts
// them in the timeline; Deletions, History, Heads and BeginBroadcast say
// how many were deleted in the epoch, the log keeps the newest DelLogSize,
// and a new epoch starts a new log.
func TestDeletionLog(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		tl := newTimeline(t, rdb, 100, time.Minute)
		opts := route.EventOptions{Owner: "job-a", ClaimTTL: 5 * time.Second, LockTTL: 5 * time.Second}
		del := func(ids ...string) route.Begin {
			t.Helper()
			b, err := tl.s.BeginEvent(ctx, danmaku.Event{Op: danmaku.OpDel, Room: tl.room, ID: testkit.Uniq("ev"), IDs: ids}, opts)
			if err != nil || b.Status != route.Acquired {
				t.Fatalf("del: %+v %v", b, err)
			}
			tl.s.ReleaseLock(ctx, b.Lock)
			return b
		}
		// Without a timeline there is no log.
		if b := del("x"); b.Epoch != "" || b.Dels != 0 {
			t.Fatalf("del in a room without a timeline: %+v", b)
		}
		first := tl.batch(tl.fresh(3))
		if first.Dels != 0 {
			t.Fatalf("dels %d before any deletion", first.Dels)
		}
		if b := del("m0001", "m0002"); b.Epoch != first.Epoch || b.Dels != 2 {
			t.Fatalf("first del: %+v", b)
		}
		if b := del("m0003"); b.Dels != 3 {
			t.Fatalf("second del: %+v", b)
		}
		if b := tl.batch(tl.fresh(1)); b.Dels != 3 {
			t.Fatalf("the next batch says %d deleted", b.Dels)
		}
		epoch, n, ids, err := tl.s.Deletions(ctx, tl.room, 1)
		if err != nil || epoch != first.Epoch || n != 3 || fmt.Sprint(ids) != "[m0002 m0003]" {
			t.Fatalf("deletions after 1: %s %d %v %v", epoch, n, ids, err)
		}
		if h := tl.history(0, 10); h.Dels != 3 {
			t.Fatalf("history dels %d", h.Dels)
		}
		heads, err := tl.s.Heads(ctx, []string{tl.room})
		if err != nil || heads[tl.room].Dels != 3 || heads[tl.room].Last != 4 {
			t.Fatalf("heads %+v %v", heads, err)
		}
		// The log keeps the newest DelLogSize ids.
		for i := 0; i < route.DelLogSize/danmaku.MaxDelIDs+1; i++ {
			batch := make([]string, danmaku.MaxDelIDs)
			for k := range batch {
				batch[k] = fmt.Sprintf("d%d-%d", i, k)
			}
			del(batch...)
		}
		_, n, ids, _ = tl.s.Deletions(ctx, tl.room, 0)
		if want := int64(3 + route.DelLogSize + danmaku.MaxDelIDs); n != want || len(ids) != route.DelLogSize || ids[len(ids)-1] != "d10-99" {
			t.Fatalf("log of %d ids, count %d, want %d kept of %d", len(ids), n, route.DelLogSize, want)
		}
		_, _, tail, _ := tl.s.Deletions(ctx, tl.room, n-2)
		if fmt.Sprint(tail) != "[d10-98 d10-99]" {
			t.Fatalf("deletions after %d: %v, want the last two", n-2, tail)
		}
		if _, _, none, _ := tl.s.Deletions(ctx, tl.room, n); len(none) != 0 {
			t.Fatalf("deletions after all %d: %v", n, none)
		}
		// A new epoch (the timeline was lost) starts a new log.
		rdb.Del(ctx, "room:timeline:{"+tl.room+"}")
		tl.known = route.Head{}
		b := tl.batch(tl.fresh(1))
		if b.Epoch == first.Epoch || b.Dels != 0 {
			t.Fatalf("new epoch: %+v", b)
		}
		if _, n, ids, _ := tl.s.Deletions(ctx, tl.room, 0); n != 0 || len(ids) != 0 {
			t.Fatalf("the new epoch's log: %d %v", n, ids)
		}
	})
}
