package route

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
)

var reviewScript = script("review")

// The review queue of a room (RoomState.Review): comments that matched a
// blocked word wait there for a moderator, oldest first, in
// room:review:{room} (id -> the item's JSON) and room:reviewq:{room} (id
// -> its accept time), all under the room's hash tag and changed together
// by one script (review.lua). An item older than the queue's TTL is
// removed by the next call; an idle queue expires with its TTL. The queue
// survives restarts of every role (it is only in Redis).
//
// An approval claims its items (ClaimReview) before it writes them: they
// leave the queue for room:reviewc:{room} until the claim ends, so a
// second approval of the same items at the same time finds none. The
// approver then removes them (written) or releases them (the write
// failed); an approver that died with a claim leaves its items to come
// back to the queue when the claim ends. A comment's retry key (its
// sender and content, room:reviewk:{room}) names the item it became, so
// a client's retry of a send without msgId does not queue it twice.

// AddReview puts items (ids unique in the room) in room's queue, which
// holds at most max, and returns the id each has there: its own, or the
// id of the item of the same sender and content (a retry) still held.
// It reports false, adding none, when the new ones do not fit.
func (s *Store) AddReview(ctx context.Context, room string, items []danmaku.ReviewItem, ttl time.Duration, max int) ([]string, bool, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, false, err
	}
	args := []any{"add", time.Now().UnixMilli(), ttl.Milliseconds(), max}
	for _, it := range items {
		if err := danmaku.CheckID("id", it.ID); err != nil {
			return nil, false, err
		}
		js, err := json.Marshal(it)
		if err != nil {
			return nil, false, err
		}
		args = append(args, it.ID, it.TS, js, retryKey(it))
	}
	res, err := reviewScript.Run(ctx, s.rdb, reviewKeys(room), args...).Result()
	if err != nil {
		return nil, false, wrap("add review", err)
	}
	list, ok := res.([]any)
	if !ok {
		return nil, false, nil // -1: full
	}
	ids := make([]string, len(list))
	for i, v := range list {
		ids[i], _ = v.(string)
	}
	return ids, true, nil
}

// retryKey names a comment by its sender and content: a send retried
// without its msgId has the same.
func retryKey(it danmaku.ReviewItem) string {
	sum := sha256.Sum256([]byte(it.Content))
	return strconv.FormatInt(it.UID, 10) + ":" + hex.EncodeToString(sum[:16])
}

// ReviewQueue returns the oldest limit items of room's queue, oldest
// first.
func (s *Store) ReviewQueue(ctx context.Context, room string, ttl time.Duration, limit int) ([]danmaku.ReviewItem, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	return s.reviewItems(ctx, room, "list", ttl, limit)
}

// ClaimReview takes the items of ids that room's queue holds out of it
// for lease and returns them, in the order of ids: no other claim gets
// them meanwhile. The caller removes them once written, or releases them.
func (s *Store) ClaimReview(ctx context.Context, room string, ids []string, ttl, lease time.Duration) ([]danmaku.ReviewItem, error) {
	args, err := reviewArgs(room, ids, lease.Milliseconds())
	if err != nil {
		return nil, err
	}
	return s.reviewItems(ctx, room, "claim", ttl, args...)
}

// ReleaseReview puts the claimed items of ids back in room's queue.
func (s *Store) ReleaseReview(ctx context.Context, room string, ids []string, ttl time.Duration) error {
	args, err := reviewArgs(room, ids)
	if err != nil {
		return err
	}
	return wrap("release review", reviewScript.Run(ctx, s.rdb, reviewKeys(room),
		append([]any{"release", time.Now().UnixMilli(), ttl.Milliseconds()}, args...)...).Err())
}

// reviewArgs checks room and ids and returns the script's arguments: head,
// then the ids.
func reviewArgs(room string, ids []string, head ...any) ([]any, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	for i, id := range ids {
		if err := danmaku.CheckID("ids["+strconv.Itoa(i)+"]", id); err != nil {
			return nil, err
		}
		head = append(head, id)
	}
	return head, nil
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

// RemoveReview takes ids out of room's queue (queued or claimed) and
// returns how many were there: of two callers removing one id at once,
// one gets it.
func (s *Store) RemoveReview(ctx context.Context, room string, ids []string, ttl time.Duration) (int, error) {
	args, err := reviewArgs(room, ids)
	if err != nil {
		return 0, err
	}
	n, err := reviewScript.Run(ctx, s.rdb, reviewKeys(room), append([]any{"remove", time.Now().UnixMilli(), ttl.Milliseconds()}, args...)...).Int64()
	return int(n), wrap("remove review", err)
}

func reviewKeys(room string) []string {
	return []string{reviewKey(room), reviewOrderKey(room), reviewClaimKey(room), reviewRetryKey(room)}
}
