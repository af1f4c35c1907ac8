package route_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

// Admit on a single server and on a cluster (where the user's and the
// address's keys live on different shards): both buckets, mutes, and the
// refund of a bucket when the other check refused.
func TestAdmit(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		slow := route.Bucket{Rate: 0.001, Burst: 10}
		adm := func(user, ip string, n int) route.Verdict {
			t.Helper()
			v, err := s.Admit(ctx, route.Admission{User: user, Room: "r1", N: n, UserBucket: slow, IP: ip, IPBucket: slow})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		u1, u2, u3 := testkit.Uniq("u"), testkit.Uniq("u"), testkit.Uniq("u")
		ip := "2001:db8:" + time.Now().Format("1504") + ":5::1"
		// The address bucket (10) ends a rotation of users at 10 messages.
		if v := adm(u1, ip, 6); !v.Allowed {
			t.Fatalf("first: %+v", v)
		}
		// Another address of the same /64 shares the bucket.
		sameNet := ip[:len(ip)-1] + "2"
		if v := adm(u2, sameNet, 6); v.Allowed || v.Limit != "ip" || v.RetryAfter <= 0 {
			t.Fatalf("second user, same /64: %+v, want refused by ip", v)
		}
		// u2's tokens taken by that request were given back: u2 has its
		// full burst from another address.
		if v := adm(u2, "192.0.2.77", 10); !v.Allowed {
			t.Fatalf("u2 after the refund: %+v", v)
		}
		// A user limit refusal gives the address its tokens back.
		other := "198.51.100." + strconv.Itoa(time.Now().Second()+1)
		if v := adm(u2, other, 1); v.Allowed || v.Limit != "user" {
			t.Fatalf("u2 empty: %+v", v)
		}
		if v := adm(u3, other, 10); !v.Allowed {
			t.Fatalf("the address after the refund: %+v", v)
		}
		// Muted in the room: refused without touching any bucket; a mute
		// elsewhere does not count; unmute lifts it.
		u4, ip4 := testkit.Uniq("u"), "203.0.113."+strconv.Itoa(time.Now().Second()+1)
		if err := s.Mute(ctx, u4, "r2", time.Minute); err != nil {
			t.Fatal(err)
		}
		if v := adm(u4, ip4, 1); !v.Allowed {
			t.Fatalf("muted in another room: %+v", v)
		}
		if err := s.Mute(ctx, u4, "", time.Minute); err != nil {
			t.Fatal(err)
		}
		if v := adm(u4, ip4, 9); !v.Muted || !v.Everywhere || v.RetryAfter < 59*time.Second {
			t.Fatalf("muted everywhere: %+v", v)
		}
		if ok, err := s.Unmute(ctx, u4, ""); !ok || err != nil {
			t.Fatalf("unmute: %v %v", ok, err)
		}
		if v := adm(u4, ip4, 9); !v.Allowed {
			t.Fatalf("after unmute, with the tokens the muted request did not take: %+v", v)
		}
		if _, err := s.Admit(ctx, route.Admission{User: u4, Room: "r1", N: 1, UserBucket: slow, IP: "not-ip", IPBucket: slow}); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("bad ip: %v", err)
		}
	})
}

// TakeHigh is a room's own bucket, on a single server and on a cluster:
// it refuses beyond the burst with the wait, other rooms are not touched,
// and GiveBackHigh returns what was taken.
func TestTakeHigh(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		b := route.Bucket{Rate: 0.5, Burst: 3}
		room, other := testkit.Uniq("r"), testkit.Uniq("r")
		take := func(room string, n int) route.Verdict {
			t.Helper()
			v, err := s.TakeHigh(ctx, room, n, b)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if v := take(room, 2); !v.Allowed {
			t.Fatalf("first: %+v", v)
		}
		v := take(room, 2)
		if v.Allowed || v.Limit != "high" || v.RetryAfter < time.Second || v.RetryAfter > 2*time.Second {
			t.Fatalf("beyond the burst: %+v, want refused for about 2 s", v)
		}
		if v := take(other, 3); !v.Allowed {
			t.Fatalf("another room: %+v", v)
		}
		if err := s.GiveBackHigh(ctx, room, 2, b); err != nil {
			t.Fatal(err)
		}
		if v := take(room, 3); !v.Allowed {
			t.Fatalf("after giving back: %+v", v)
		}
		if _, err := s.TakeHigh(ctx, "a b", 1, b); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("bad room: %v", err)
		}
		if _, err := s.TakeHigh(ctx, room, 4, b); danmaku.ErrorField(err) != "n" {
			t.Fatalf("more than the burst: %v", err)
		}
	})
}
