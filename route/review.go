package route

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
)

var reviewScript = script("review")

// The review queue of a room (RoomState.Review): comments that matched a
// blocked word wait there for a moderator, oldest first, in
// room:review:{room} (id -> the item's JSON) and room:reviewq:{room} (id
// -> its accept time), both under the room's hash tag and changed together
// by one script (review.lua). An item older than the queue's TTL is
// removed by the next call; an idle queue expires with its TTL. The queue
// survives restarts of every role (it is only in Redis).

// AddReview puts items (ids unique in the room) in room's queue, which
// holds at most max: it reports false, adding none, when they do not fit.
// An id already queued keeps its place.
func (s *Store) AddReview(ctx context.Context, room string, items []danmaku.ReviewItem, ttl time.Duration, max int) (bool, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return false, err
	}
	args := []any{"add", time.Now().UnixMilli(), ttl.Milliseconds(), max}
	for _, it := range items {
		if err := danmaku.CheckID("id", it.ID); err != nil {
			return false, err
		}
		js, err := json.Marshal(it)
		if err != nil {
			return false, err
		}
		args = append(args, it.ID, it.TS, js)
	}
	n, err := reviewScript.Run(ctx, s.rdb, reviewKeys(room), args...).Int64()
	if err != nil {
		return false, wrap("add review", err)
	}
	return n >= 0, nil
}

// ReviewQueue returns the oldest limit items of room's queue, oldest
// first.
func (s *Store) ReviewQueue(ctx context.Context, room string, ttl time.Duration, limit int) ([]danmaku.ReviewItem, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	return s.reviewItems(ctx, room, "list", ttl, limit)
}

// ReviewItems returns the items of ids that room's queue holds, in the
// order of ids.
func (s *Store) ReviewItems(ctx context.Context, room string, ids []string, ttl time.Duration) ([]danmaku.ReviewItem, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		if err := danmaku.CheckID("ids["+strconv.Itoa(i)+"]", id); err != nil {
			return nil, err
		}
		args[i] = id
	}
	return s.reviewItems(ctx, room, "get", ttl, args...)
}

func (s *Store) reviewItems(ctx context.Context, room, op string, ttl time.Duration, args ...any) ([]danmaku.ReviewItem, error) {
	res, err := reviewScript.Run(ctx, s.rdb, reviewKeys(room), append([]any{op, time.Now().UnixMilli(), ttl.Milliseconds()}, args...)...).Slice()
	if err != nil {
		return nil, wrap("review queue", err)
	}
	out := make([]danmaku.ReviewItem, 0, len(res))
	for _, v := range res {
		js, _ := v.(string)
		var it danmaku.ReviewItem
		if json.Unmarshal([]byte(js), &it) == nil {
			out = append(out, it)
		}
	}
	return out, nil
}

// RemoveReview takes ids out of room's queue and returns how many were
// there: of two callers removing one id at once, one gets it.
func (s *Store) RemoveReview(ctx context.Context, room string, ids []string, ttl time.Duration) (int, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return 0, err
	}
	args := []any{"remove", time.Now().UnixMilli(), ttl.Milliseconds()}
	for i, id := range ids {
		if err := danmaku.CheckID("ids["+strconv.Itoa(i)+"]", id); err != nil {
			return 0, err
		}
		args = append(args, id)
	}
	n, err := reviewScript.Run(ctx, s.rdb, reviewKeys(room), args...).Int64()
	return int(n), wrap("remove review", err)
}

func reviewKeys(room string) []string { return []string{reviewKey(room), reviewOrderKey(room)} }
