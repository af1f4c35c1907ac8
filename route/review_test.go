package route_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

// A room's review queue keeps its items oldest first, refuses what does
// not fit, gives an id to one claim or remover only, takes a retry of an
// item (same sender and content, another id) as that item, and loses
// items older than its TTL; on a single server and on a cluster.
func TestReviewQueueStore(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		room := testkit.Uniq("room")
		now := time.Now().UnixMilli()
		item := func(id string, age int64) danmaku.ReviewItem {
			return danmaku.ReviewItem{ID: id, UID: 1, Name: "n", Content: "c " + id, TS: now - age, Word: "w"}
		}
		ttl := time.Minute
		if ids, ok, err := s.AddReview(ctx, room, []danmaku.ReviewItem{item("b", 10), item("a", 20)}, ttl, 3); !ok || err != nil || !slices.Equal(ids, []string{"b", "a"}) {
			t.Fatalf("add: %v %v %v", ids, ok, err)
		}
		if _, ok, err := s.AddReview(ctx, room, []danmaku.ReviewItem{item("c", 0), item("d", 0)}, ttl, 3); ok || err != nil {
			t.Fatalf("add beyond the max: %v %v", ok, err)
		}
		retry := item("b2", 0)
		retry.Content = "c b"
		if ids, ok, err := s.AddReview(ctx, room, []danmaku.ReviewItem{retry}, ttl, 3); !ok || err != nil || !slices.Equal(ids, []string{"b"}) {
			t.Fatalf("a retry of b: %v %v %v", ids, ok, err)
		}
		got, err := s.ReviewQueue(ctx, room, ttl, 10)
		if err != nil || len(got) != 2 || got[0] != item("a", 20) || got[1].ID != "b" {
			t.Fatalf("queue %+v %v", got, err)
		}
		if got, err := s.ClaimReview(ctx, room, []string{"b", "x"}, ttl, time.Minute); err != nil || len(got) != 1 || got[0].ID != "b" {
			t.Fatalf("claim %+v %v", got, err)
		}
		if got, err := s.ClaimReview(ctx, room, []string{"b"}, ttl, time.Minute); err != nil || len(got) != 0 {
			t.Fatalf("claimed twice: %+v %v", got, err)
		}
		if got, _ := s.ReviewQueue(ctx, room, ttl, 10); len(got) != 1 || got[0].ID != "a" {
			t.Fatalf("queue while b is claimed: %+v", got)
		}
		if err := s.ReleaseReview(ctx, room, []string{"b"}, ttl); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.ReviewQueue(ctx, room, ttl, 10); len(got) != 2 || got[1].ID != "b" {
			t.Fatalf("queue after the release: %+v", got)
		}
		// A claim that ends (its approver died) puts the item back.
		if got, _ := s.ClaimReview(ctx, room, []string{"b"}, ttl, 20*time.Millisecond); len(got) != 1 {
			t.Fatalf("claim again: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
		if got, _ := s.ReviewQueue(ctx, room, ttl, 10); len(got) != 2 || got[1].ID != "b" {
			t.Fatalf("queue after the claim ended: %+v", got)
		}
		if got, _ := s.ClaimReview(ctx, room, []string{"b"}, ttl, time.Minute); len(got) != 1 {
			t.Fatalf("claim b to remove it: %+v", got)
		}
		if n, err := s.RemoveReview(ctx, room, []string{"a", "b", "x"}, ttl); n != 2 || err != nil {
			t.Fatalf("remove: %d %v", n, err)
		}
		if n, _ := s.RemoveReview(ctx, room, []string{"a"}, ttl); n != 0 {
			t.Fatalf("removed twice: %d", n)
		}
		// Once b is gone, the same content is a comment of its own.
		if ids, ok, err := s.AddReview(ctx, room, []danmaku.ReviewItem{retry}, ttl, 3); !ok || err != nil || !slices.Equal(ids, []string{"b2"}) {
			t.Fatalf("the content again after b: %v %v %v", ids, ok, err)
		}
		// b2 was accepted at now: a TTL shorter than its age drops it.
		time.Sleep(50 * time.Millisecond)
		if got, err := s.ReviewQueue(ctx, room, 20*time.Millisecond, 10); err != nil || len(got) != 0 {
			t.Fatalf("after the TTL: %+v %v", got, err)
		}
		if _, ok, err := s.AddReview(ctx, room, []danmaku.ReviewItem{item("a2", 0)}, ttl, 1); !ok || err != nil {
			t.Fatalf("room again after expiry: %v %v", ok, err)
		}
	})
}
