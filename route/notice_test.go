package route_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// TestBeginEndNotices: notices are claimed per id in keys of their own
// (a room's message with the same id is not touched), the users'
// connections come back as comet counts, only for users with a claimed
// notice and a connection, and marked notices are processed for every
// owner.
func TestBeginEndNotices(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		u, v, w := testkit.Uniq("u"), testkit.Uniq("v"), testkit.Uniq("w")
		c1, c2, room := testkit.Uniq("comet"), testkit.Uniq("comet"), testkit.Uniq("room")
		for _, c := range []route.Conn{
			{ID: testkit.Uniq("c"), Room: room, User: u, Comet: c1},
			{ID: testkit.Uniq("c"), Room: room, User: u, Comet: c1},
			{ID: testkit.Uniq("c"), Room: room, User: u, Comet: c2},
			{ID: testkit.Uniq("c"), Room: room, User: v, Comet: c2},
		} {
			if err := s.Register(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		id := testkit.Uniq("n")
		claims := []route.NoticeClaim{{User: u, ID: id}, {User: u, ID: id + "b"}, {User: w, ID: id}, {ID: id}, {User: v, ID: id}}
		opts := route.NoticeOptions{Owner: "a", ClaimTTL: 5 * time.Second}
		b, err := s.BeginNotices(ctx, claims, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range b.States {
			if st != route.Claimed {
				t.Fatalf("state %d = %v, want claimed (%+v)", i, st, b)
			}
		}
		want := map[string]map[string]int64{u: {c1: 2, c2: 1}, v: {c2: 1}}
		if len(b.Comets) != 2 || !maps.Equal(b.Comets[u], want[u]) || !maps.Equal(b.Comets[v], want[v]) {
			t.Fatalf("comets = %v, want %v (no entry for the offline user or the broadcast)", b.Comets, want)
		}
		within(t, "user claim PTTL", pttl(t, rdb, "msg:processed:user:{"+u+"}:"+id), 4900*time.Millisecond, 5*time.Second)
		within(t, "broadcast claim PTTL", pttl(t, rdb, "msg:processed:all:{all}:"+id), 4900*time.Millisecond, 5*time.Second)

		// A room named like the user, with a message of the same id, is
		// claimed on its own.
		rb, err := s.BeginBroadcast(ctx, u, []danmaku.Message{{ID: id}}, route.BeginOptions{Owner: "a", ClaimTTL: time.Second, LockTTL: time.Second})
		if err != nil || rb.Status != route.Acquired || rb.States[0] != route.Claimed {
			t.Fatalf("room message with a notice's id: %+v, %v", rb, err)
		}

		// Another owner finds them busy and reads no routes; the owner
		// itself claims them again.
		b2, err := s.BeginNotices(ctx, claims[:2], route.NoticeOptions{Owner: "b", ClaimTTL: time.Second})
		if err != nil || b2.States[0] != route.Busy || b2.States[1] != route.Busy || len(b2.Comets) != 0 {
			t.Fatalf("begin by another owner = %+v, %v", b2, err)
		}
		if b3, err := s.BeginNotices(ctx, claims[:1], opts); err != nil || b3.States[0] != route.Claimed || !maps.Equal(b3.Comets[u], want[u]) {
			t.Fatalf("begin again by the owner = %+v, %v", b3, err)
		}

		if err := s.EndNotices(ctx, claims, time.Minute); err != nil {
			t.Fatal(err)
		}
		within(t, "processed PTTL", pttl(t, rdb, "msg:processed:user:{"+u+"}:"+id), 59*time.Second, time.Minute)
		b4, err := s.BeginNotices(ctx, claims, route.NoticeOptions{Owner: "b", ClaimTTL: time.Second})
		if err != nil || len(b4.Comets) != 0 {
			t.Fatalf("begin of delivered notices = %+v, %v", b4, err)
		}
		for i, st := range b4.States {
			if st != route.Processed {
				t.Fatalf("state %d after EndNotices = %v, want processed", i, st)
			}
		}

		got, err := s.UserComets(ctx, u)
		if err != nil || !maps.Equal(got, want[u]) {
			t.Fatalf("UserComets = %v, %v; want %v", got, err, want[u])
		}
		if got, err := s.UserComets(ctx, w); err != nil || len(got) != 0 {
			t.Fatalf("UserComets of an offline user = %v, %v", got, err)
		}
	})
}

func TestNoticesRejectBadInput(t *testing.T) {
	s := route.New(redisserver.Client(t))
	ctx := context.Background()
	opts := route.NoticeOptions{Owner: "a", ClaimTTL: time.Second}
	cases := map[string]struct {
		claims []route.NoticeClaim
		field  string
	}{
		"bad user":     {[]route.NoticeClaim{{User: "a:b", ID: "x"}}, "user"},
		"empty id":     {[]route.NoticeClaim{{User: "7"}}, "msgId"},
		"repeated id":  {[]route.NoticeClaim{{User: "7", ID: "x"}, {User: "7", ID: "x"}}, "msgId"},
		"bad id":       {[]route.NoticeClaim{{ID: "{x}"}}, "msgId"},
		"bad owner id": {nil, "owner"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := opts
			if tc.field == "owner" {
				o.Owner = "a b"
			}
			_, err := s.BeginNotices(ctx, tc.claims, o)
			if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != tc.field {
				t.Fatalf("err = %v, want EINVALID on %s", err, tc.field)
			}
		})
	}
	if _, err := s.UserComets(ctx, ""); danmaku.ErrorField(err) != "user" {
		t.Fatalf("UserComets(\"\"): %v", err)
	}
}
