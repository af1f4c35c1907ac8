package route_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

// A room's review queue keeps its items oldest first, refuses what does
// not fit, gives an id to one remover only, and loses items older than
// its TTL; on a single server and on a cluster.
func TestReviewQueueStore(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		room := testkit.Uniq("room")
		now := time.Now().UnixMilli()
		item := func(id string, age int64) danmaku.ReviewItem {
			return danmaku.ReviewItem{ID: id, UID: 1, Name: "n", Content: "c " + id, TS: now - age, Word: "w"}
		}
		ttl := time.Minute
		if ok, err := s.AddReview(ctx, room, []danmaku.ReviewItem{item("b", 10), item("a", 20)}, ttl, 3); !ok || err != nil {
			t.Fatalf("add: %v %v", ok, err)
		}
		if ok, err := s.AddReview(ctx, room, []danmaku.ReviewItem{item("c", 0), item("d", 0)}, ttl, 3); ok || err != nil {
			t.Fatalf("add beyond the max: %v %v", ok, err)
		}
		got, err := s.ReviewQueue(ctx, room, ttl, 10)
		if err != nil || len(got) != 2 || got[0] != item("a", 20) || got[1].ID != "b" {
			t.Fatalf("queue %+v %v", got, err)
		}
		if got, err := s.ReviewItems(ctx, room, []string{"b", "x"}, ttl); err != nil || len(got) != 1 || got[0].ID != "b" {
			t.Fatalf("items %+v %v", got, err)
		}
		if n, err := s.RemoveReview(ctx, room, []string{"a", "x"}, ttl); n != 1 || err != nil {
			t.Fatalf("remove: %d %v", n, err)
		}
		if n, _ := s.RemoveReview(ctx, room, []string{"a"}, ttl); n != 0 {
			t.Fatalf("removed twice: %d", n)
		}
		// b was accepted 10 ms before now: a TTL shorter than its age drops it.
		time.Sleep(50 * time.Millisecond)
		if got, err := s.ReviewQueue(ctx, room, 20*time.Millisecond, 10); err != nil || len(got) != 0 {
			t.Fatalf("after the TTL: %+v %v", got, err)
		}
		if ok, err := s.AddReview(ctx, room, []danmaku.ReviewItem{item("a2", 0)}, ttl, 1); !ok || err != nil {
			t.Fatalf("room again after expiry: %v %v", ok, err)
		}
	})
}
