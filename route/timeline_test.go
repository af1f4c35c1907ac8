package route_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// timeline drives BeginBroadcast and EndBroadcast for one room as job does:
// it remembers the head it was given and passes it back.
type timeline struct {
	t     *testing.T
	s     *route.Store
	room  string
	opts  route.BeginOptions
	known route.Head
	n     int
}

func newTimeline(t *testing.T, rdb redis.UniversalClient, size int, ttl time.Duration) *timeline {
	return &timeline{t: t, s: route.New(rdb), room: testkit.Uniq("room"),
		opts: route.BeginOptions{Owner: "job-a", ClaimTTL: 5 * time.Second, LockTTL: 5 * time.Second,
			HistorySize: size, HistoryTTL: ttl}}
}

// fresh returns n messages with ids never used before.
func (tl *timeline) fresh(n int) []danmaku.Message {
	ids := make([]string, n)
	for i := range ids {
		tl.n++
		ids[i] = fmt.Sprintf("m%04d", tl.n)
	}
	return msgsOf(ids...)
}

// batch begins msgs, checks the lock was taken, ends the broadcast, and
// returns the outcome.
func (tl *timeline) batch(msgs []danmaku.Message) route.Begin {
	tl.t.Helper()
	ctx := context.Background()
	o := tl.opts
	o.Known = tl.known
	b, err := tl.s.BeginBroadcast(ctx, tl.room, msgs, o)
	if err != nil || b.Status != route.Acquired {
		tl.t.Fatalf("begin = %+v, %v", b, err)
	}
	tl.known = b.Head()
	var ids []string
	for i, st := range b.States {
		if st == route.Claimed {
			ids = append(ids, msgs[i].ID)
		}
	}
	if err := tl.s.EndBroadcast(ctx, b.Lock, ids, time.Minute); err != nil {
		tl.t.Fatal(err)
	}
	return b
}

func (tl *timeline) history(since int64, limit int) route.History {
	tl.t.Helper()
	h, err := tl.s.History(context.Background(), tl.room, since, limit)
	if err != nil {
		tl.t.Fatal(err)
	}
	return h
}

// wantRange checks that h holds exactly positions from..to, each with the
// id want gives it.
func wantRange(t *testing.T, h route.History, from, to int64, want func(pos int64) string) {
	t.Helper()
	if n := to - from + 1; int64(len(h.Msgs)) != max(n, 0) {
		t.Fatalf("history has %d messages, want %d..%d: %+v", len(h.Msgs), from, to, h)
	}
	for i, m := range h.Msgs {
		p := from + int64(i)
		if m.Pos != p || m.ID != want(p) || m.Content != "c-"+m.ID {
			t.Fatalf("history[%d] = %+v, want pos %d id %s", i, m, p, want(p))
		}
	}
}

func msgID(pos int64) string { return fmt.Sprintf("m%04d", pos) }

func TestTimelinePositionsContiguous(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		tl := newTimeline(t, rdb, 100, time.Minute)
		var epoch string
		next := int64(1)
		for _, n := range []int{1, 3, 5, 2} {
			b := tl.batch(tl.fresh(n))
			if epoch == "" {
				epoch = b.Epoch
			}
			if b.Epoch != epoch || epoch == "" {
				t.Fatalf("epoch %q, then %q", epoch, b.Epoch)
			}
			for i, p := range b.Pos {
				if p != next {
					t.Fatalf("batch of %d: pos[%d] = %d, want %d", n, i, p, next)
				}
				next++
			}
		}
		if tl.known != (route.Head{Epoch: epoch, Last: 11}) {
			t.Fatalf("head = %+v", tl.known)
		}
		h := tl.history(0, 100)
		if h.Epoch != epoch || h.Last != 11 || h.First != 1 {
			t.Fatalf("history = %+v", h)
		}
		wantRange(t, h, 1, 11, msgID)
		// Stored without positions: they follow from the element's place.
		raw, _ := rdb.LIndex(context.Background(), "room:history:{"+tl.room+"}", 0).Result()
		if raw != `{"id":"m0001","uid":1,"name":"n","content":"c-m0001","ts":1}` {
			t.Fatalf("stored element %s", raw)
		}
	})
}

func TestHistoryBoundedAndExpiring(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		tl := newTimeline(t, rdb, 5, 3*time.Second)
		tl.batch(tl.fresh(4))
		tl.batch(tl.fresh(4))
		hk, tk := "room:history:{"+tl.room+"}", "room:timeline:{"+tl.room+"}"
		if n := rdb.LLen(ctx, hk).Val(); n != 5 {
			t.Fatalf("history holds %d, want 5", n)
		}
		h := tl.history(0, 100)
		if h.First != 4 || h.Last != 8 {
			t.Fatalf("history = %+v, want 4..8", h)
		}
		wantRange(t, h, 4, 8, msgID)
		// A batch larger than the history keeps its newest messages.
		tl.batch(tl.fresh(7))
		h = tl.history(0, 100)
		if h.First != 11 || h.Last != 15 {
			t.Fatalf("history = %+v, want 11..15", h)
		}
		wantRange(t, h, 11, 15, msgID)
		within(t, "timeline PTTL", pttl(t, rdb, tk), 2900*time.Millisecond, 3*time.Second)
		within(t, "history PTTL", pttl(t, rdb, hk), 2900*time.Millisecond, 3*time.Second)
		// Each write refreshes the TTL.
		rdb.PExpire(ctx, tk, time.Second)
		rdb.PExpire(ctx, hk, time.Second)
		tl.batch(tl.fresh(1))
		within(t, "refreshed timeline PTTL", pttl(t, rdb, tk), 2900*time.Millisecond, 3*time.Second)
		within(t, "refreshed history PTTL", pttl(t, rdb, hk), 2900*time.Millisecond, 3*time.Second)
	})
}

// flushAll empties every master, as a restart without persistence would.
func flushAll(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	err := redisserver.ForEachMaster(ctx, rdb, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() })
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewEpochWhenTimelineLost(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		tl := newTimeline(t, rdb, 100, time.Minute)
		e1 := tl.batch(tl.fresh(3)).Epoch

		// The hash is gone (expired or deleted) while the list is not: a new
		// epoch from 1, and the old epoch's elements are gone with it.
		rdb.Del(ctx, "room:timeline:{"+tl.room+"}")
		b := tl.batch(tl.fresh(2))
		if b.Epoch == e1 || b.Pos[0] != 1 || b.Pos[1] != 2 {
			t.Fatalf("after the hash was deleted: epoch %q (was %q), pos %v", b.Epoch, e1, b.Pos)
		}
		h := tl.history(0, 100)
		wantRange(t, h, 1, 2, func(p int64) string { return msgID(p + 3) })

		// Redis emptied: a new epoch again, though the caller knows the old.
		flushAll(t, rdb)
		b2 := tl.batch(tl.fresh(1))
		if b2.Epoch == b.Epoch || b2.Epoch == e1 || b2.Pos[0] != 1 {
			t.Fatalf("after FLUSHALL: epoch %q (was %q), pos %v", b2.Epoch, b.Epoch, b2.Pos)
		}
		h = tl.history(-1, 10)
		if h.Epoch != b2.Epoch || h.Last != 1 || h.First != 1 {
			t.Fatalf("history after FLUSHALL = %+v", h)
		}
		wantRange(t, h, 1, 1, func(int64) string { return msgID(6) })
	})
}

func TestNewEpochWhenTimelineWentBack(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		tl := newTimeline(t, rdb, 100, time.Minute)
		tl.batch(tl.fresh(3))
		b := tl.batch(tl.fresh(2))
		if tl.known.Last != 5 {
			t.Fatalf("head %+v", tl.known)
		}
		// A failover to a replica that missed the last batch: hash and list
		// as they were after position 3.
		tk, hk := "room:timeline:{"+tl.room+"}", "room:history:{"+tl.room+"}"
		rdb.HSet(ctx, tk, "seq", 3)
		rdb.RPop(ctx, hk)
		rdb.RPop(ctx, hk)
		// Another job, which knows nothing of this room, continues the epoch.
		other := route.BeginOptions{Owner: "job-b", ClaimTTL: time.Second, LockTTL: time.Second}
		ob, err := tl.s.BeginBroadcast(ctx, tl.room, tl.fresh(1), other)
		if err != nil || ob.Epoch != b.Epoch || ob.Pos[0] != 4 {
			t.Fatalf("begin without a known head = %+v, %v", ob, err)
		}
		tl.s.EndBroadcast(ctx, ob.Lock, []string{msgID(6)}, time.Minute)
		// The job that handed out 4 and 5 must not see them reused.
		nb := tl.batch(tl.fresh(2))
		if nb.Epoch == b.Epoch || nb.Pos[0] != 1 || nb.Pos[1] != 2 {
			t.Fatalf("begin after the timeline went back: epoch %q (was %q), pos %v", nb.Epoch, b.Epoch, nb.Pos)
		}
		wantRange(t, tl.history(0, 10), 1, 2, func(p int64) string { return msgID(p + 6) })
		// A known head of another epoch is no regression.
		tl.known = route.Head{Epoch: "other", Last: 100}
		if b := tl.batch(tl.fresh(1)); b.Epoch != nb.Epoch || b.Pos[0] != 3 {
			t.Fatalf("begin with a stale epoch's head = %+v", b)
		}
	})
}

func TestOnlyClaimedMessagesGetPositions(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		tl := newTimeline(t, rdb, 100, time.Minute)
		done := tl.fresh(2) // m0001, m0002: delivered
		tl.batch(done)
		busy := tl.fresh(1) // m0003: claimed by another owner
		// An event of job-b's under the same id holds the claim.
		ev := danmaku.Event{Op: danmaku.OpBan, Room: tl.room, ID: busy[0].ID, User: "u1", Until: 1}
		eb, err := tl.s.BeginEvent(ctx, ev, route.EventOptions{Owner: "job-b", ClaimTTL: time.Minute, LockTTL: time.Minute})
		if err != nil || eb.Status != route.Acquired {
			t.Fatal(eb, err)
		}
		if err := tl.s.ReleaseLock(ctx, eb.Lock); err != nil {
			t.Fatal(err)
		}
		news := tl.fresh(2) // m0004, m0005
		batch := []danmaku.Message{news[0], done[1], busy[0], news[1], done[0]}
		b := tl.batch(batch)
		want := []int64{3, 0, 0, 4, 0}
		for i, p := range b.Pos {
			if p != want[i] {
				t.Fatalf("positions %v (states %v), want %v", b.Pos, b.States, want)
			}
		}
		wantRange(t, tl.history(0, 10), 1, 4, func(p int64) string {
			return []string{"", "m0001", "m0002", "m0004", "m0005"}[p]
		})
		// Nothing claimable: no positions, the timeline does not move.
		o := tl.opts
		b2, err := tl.s.BeginBroadcast(ctx, tl.room, batch[1:3], o)
		if err != nil || b2.Status != route.NoneClaimable || b2.Pos != nil || b2.Head() != (route.Head{}) {
			t.Fatalf("begin of nothing claimable = %+v, %v", b2, err)
		}
		if h := tl.history(-1, 1); h.Last != 4 {
			t.Fatalf("head moved to %d", h.Last)
		}
	})
}

func TestHistoryRanges(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		tl := newTimeline(t, rdb, 6, time.Minute)
		tl.batch(tl.fresh(4))
		tl.batch(tl.fresh(6)) // positions 1..10, 5..10 kept
		for _, c := range []struct {
			since    int64
			limit    int
			from, to int64
		}{
			{7, 2, 8, 9},       // inside the kept range
			{7, 100, 8, 10},    // to the end
			{0, 3, 5, 7},       // from the start of the epoch: the oldest kept
			{2, 100, 5, 10},    // older than the kept range: from the oldest kept
			{10, 5, 11, 10},    // up to date: nothing
			{500, 5, 501, 500}, // a position of another epoch: nothing
			{-1, 3, 8, 10},     // the newest three
			{-1, 100, 5, 10},   // the newest, all kept
		} {
			h := tl.history(c.since, c.limit)
			if h.Last != 10 || h.First != 5 || h.Epoch != tl.known.Epoch {
				t.Fatalf("since %d: head %+v", c.since, h)
			}
			wantRange(t, h, c.from, c.to, msgID)
		}
		ctx := context.Background()
		h, err := tl.s.History(ctx, testkit.Uniq("room"), 0, 10)
		if err != nil || h.Epoch != "" || h.Last != 0 || h.First != 1 || len(h.Msgs) != 0 {
			t.Fatalf("history of a room without one = %+v, %v", h, err)
		}
		if _, err := tl.s.History(ctx, tl.room, 0, 0); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("limit 0: %v", err)
		}
		if _, err := tl.s.History(ctx, "bad room", 0, 1); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("bad room: %v", err)
		}
	})
}

func TestHeads(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a, b := newTimeline(t, rdb, 10, time.Minute), newTimeline(t, rdb, 10, time.Minute)
		a.batch(a.fresh(3))
		b.batch(b.fresh(1))
		b.batch(b.fresh(1))
		none := testkit.Uniq("room")
		heads, err := a.s.Heads(ctx, []string{a.room, none, b.room})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]route.Head{a.room: {Epoch: a.known.Epoch, Last: 3}, none: {}, b.room: {Epoch: b.known.Epoch, Last: 2}}
		if len(heads) != 3 || heads[a.room] != want[a.room] || heads[b.room] != want[b.room] || heads[none] != (route.Head{}) {
			t.Fatalf("heads = %+v, want %+v", heads, want)
		}
		if a.known.Epoch == b.known.Epoch {
			t.Fatal("two rooms share an epoch id")
		}
		if _, err := a.s.Heads(ctx, []string{a.room, "bad room"}); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("bad room: %v", err)
		}
	})
}
