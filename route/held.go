package route

import (
	"context"
	"encoding/json"
	"time"

	"github.com/danmaku/danmaku"
)

var heldScript = script("held")

// The comments a room's non-moderator delay holds (RoomState.DelaySeconds)
// are in job's memory until their release; job also lists them in
// room:held:{room} and room:heldm:{room} (PublishHeld), under the room's
// hash tag, so moderators can see them (HeldList) and delete them before
// anyone does. An entry leaves the list at its release time, or when
// MarkDeleted marks its id deleted, in the same call; an id marked
// deleted is never listed again (a job that redelivers a deleted held
// message after a crash does not bring it back). The list expires a
// minute after its last release.

// PublishHeld lists items, held comments of room, until their release.
func (s *Store) PublishHeld(ctx context.Context, room string, items []danmaku.HeldItem) error {
	if err := danmaku.CheckID("room", room); err != nil {
		return err
	}
	keys := []string{heldKey(room), heldMsgKey(room)}
	args := []any{"add", time.Now().UnixMilli()}
	for _, it := range items {
		if err := danmaku.CheckID("id", it.ID); err != nil {
			return err
		}
		js, err := json.Marshal(it)
		if err != nil {
			return err
		}
		keys = append(keys, processedKey(room, it.ID))
		args = append(args, it.ID, it.ReleaseAt, js)
	}
	return wrap("publish held", heldScript.Run(ctx, s.rdb, keys, args...).Err())
}

// HeldList returns the first limit comments room holds, soonest released
// first.
func (s *Store) HeldList(ctx context.Context, room string, limit int) ([]danmaku.HeldItem, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	res, err := heldScript.Run(ctx, s.rdb, []string{heldKey(room), heldMsgKey(room)}, "list", time.Now().UnixMilli(), limit).Slice()
	if err != nil {
		return nil, wrap("held list", err)
	}
	out := make([]danmaku.HeldItem, 0, len(res))
	for _, v := range res {
		js, _ := v.(string)
		var it danmaku.HeldItem
		if json.Unmarshal([]byte(js), &it) == nil {
			out = append(out, it)
		}
	}
	return out, nil
}
