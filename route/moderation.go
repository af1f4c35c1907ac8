package route

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

var (
	beginEventScript = script("begin_event")
	deletionsScript  = script("deletions")
)

// DelLogSize is how many of the newest deleted ids a room's deletion log
// keeps.
const DelLogSize = 1000

// BanError is Register's refusal of a user banned from the room.
type BanError struct {
	Room, User string
	// Left is what the ban still lasts.
	Left time.Duration
}

func (e *BanError) Error() string {
	return "user " + e.User + " is banned from room " + e.Room + " for another " + e.Left.Round(time.Second).String()
}

// Ban bans user from room for d: Register refuses the user's connections
// to the room and Admit the user's sends to it until d has passed. Banning
// again replaces the duration. The key carries the room's hash tag, so the
// registry's join script reads it with the room's keys.
func (s *Store) Ban(ctx context.Context, user, room string, d time.Duration) error {
	if err := checkIDs("user", user, "room", room); err != nil {
		return err
	}
	if d < time.Millisecond {
		return danmaku.Errorf(danmaku.EINVALID, "duration", "must be at least 1ms")
	}
	return s.setUntil(ctx, banKey(room, user), Sanction{Kind: "ban", User: user, Room: room}, d)
}

// Unban lifts the ban of user from room and reports whether there was one.
// Connections closed by the ban stay closed; the user may join again.
func (s *Store) Unban(ctx context.Context, user, room string) (bool, error) {
	if err := checkIDs("user", user, "room", room); err != nil {
		return false, err
	}
	n, err := s.rdb.Del(ctx, banKey(room, user)).Result()
	if err == nil {
		err = s.unindex(ctx, Sanction{Kind: "ban", User: user, Room: room})
	}
	return n > 0, wrap("unban", err)
}

// EventOptions are the durations of BeginEvent.
type EventOptions struct {
	Owner    string
	ClaimTTL time.Duration
	LockTTL  time.Duration
}

// BeginEvent runs the guards of one room event in a single atomic script:
// the room's lock must be free, the event's id is claimed for the owner
// (like a message id), the lock is taken with a unique token, and
// room:comets:{room} is read; a del event also turns the deleted messages'
// elements of room:history:{room} into tombstones, in their places, so
// every position stays where it was and readers of the history see the
// hole for what it is. It opens no cooldown window and assigns no
// position. A del event also appends the ids to the room's deletion log
// (see Deletions). The Begin has Status, States (one), and with Acquired
// Lock, Comets, Tombstoned, Epoch and Dels. The caller pushes the event and
// ends with EndBroadcast (the event's id), as for messages.
func (s *Store) BeginEvent(ctx context.Context, ev danmaku.Event, o EventOptions) (Begin, error) {
	var b Begin
	if err := ev.Check(); err != nil {
		return b, err
	}
	if err := danmaku.CheckID("owner", o.Owner); err != nil {
		return b, err
	}
	token := newToken()
	keys := []string{lockKey(ev.Room), roomCometsKey(ev.Room), historyKey(ev.Room), processedKey(ev.Room, ev.ID),
		timelineKey(ev.Room), delsKey(ev.Room), roomStateKey(ev.Room)}
	args := []any{o.Owner, o.ClaimTTL.Milliseconds(), token, o.LockTTL.Milliseconds(), DelLogSize}
	if ev.Op == danmaku.OpDel {
		for _, id := range ev.IDs {
			args = append(args, id)
		}
	}
	res, err := beginEventScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		// As for BeginBroadcast: AbortBroadcast can take the lock back.
		b.Lock = &Lock{Room: ev.Room, Token: token}
		return b, wrap("begin event", err)
	}
	if len(res) != 7 {
		return b, danmaku.Errorf(danmaku.EINTERNAL, "", "begin event returned %d values", len(res))
	}
	status, _ := res[0].(int64)
	state, _ := res[1].(int64)
	b.Status = Status(status)
	switch b.Status {
	case Acquired:
		b.States = []ClaimState{Claimed}
		b.Lock = &Lock{Room: ev.Room, Token: token}
		b.Comets = parseCounts(res[2])
		n, _ := res[3].(int64)
		b.Tombstoned = int(n)
		b.Epoch, _ = res[4].(string)
		b.Dels, _ = res[5].(int64)
		b.Sv, _ = res[6].(int64)
	case NoneClaimable:
		b.States = []ClaimState{ClaimState(state)}
	case LockedElsewhere:
	default:
		return Begin{}, danmaku.Errorf(danmaku.EINTERNAL, "", "begin event returned status %s", strconv.FormatInt(status, 10))
	}
	return b, nil
}

// Deletions reads room's deletion log: every message id deleted in the
// timeline's epoch is numbered 1, 2, 3... in the order of the deletions,
// and the log keeps the newest DelLogSize. It returns the epoch, the
// number of ids deleted in it (the dels of Head and History) and the ids
// numbered after after that the log still holds, oldest first (only those
// leave Redis). A comet that learns from a push or a read that more ids
// were deleted than it applied (it missed a del event) reads the rest here.
func (s *Store) Deletions(ctx context.Context, room string, after int64) (epoch string, dels int64, ids []string, err error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return "", 0, nil, err
	}
	res, err := deletionsScript.Run(ctx, s.rdb, []string{timelineKey(room), delsKey(room)}, after).Slice()
	if err != nil {
		return "", 0, nil, wrap("deletions", err)
	}
	if len(res) != 3 {
		return "", 0, nil, danmaku.Errorf(danmaku.EINTERNAL, "", "deletions returned %d values", len(res))
	}
	epoch, _ = res[0].(string)
	dels, _ = res[1].(int64)
	log, _ := res[2].([]any)
	ids = make([]string, 0, len(log))
	for _, v := range log {
		id, _ := v.(string)
		ids = append(ids, id)
	}
	return epoch, dels, ids, nil
}

// MarkDeleted marks the ids of room deleted before they got a position:
// msg:processed:{room}:<id> is set to "done" for ttl where it does not
// exist, so a message held in job (a room's delay) or still on its way
// finds its claim taken and gets no position, whatever crashes and
// redeliveries come between the delete and its del event. An id with a
// claim (positioned, or an event's) keeps it.
func (s *Store) MarkDeleted(ctx context.Context, room string, ids []string, ttl time.Duration) error {
	if err := danmaku.CheckID("room", room); err != nil {
		return err
	}
	for _, id := range ids {
		if err := danmaku.CheckID("id", id); err != nil {
			return err
		}
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.SetNX(ctx, processedKey(room, id), "done", ttl)
		}
		if len(ids) > 0 {
			// Off the list of held comments (held.go) as well.
			members := make([]any, len(ids))
			for i, id := range ids {
				members[i] = id
			}
			p.ZRem(ctx, heldKey(room), members...)
			p.HDel(ctx, heldMsgKey(room), ids...)
		}
		return nil
	})
	return wrap("mark deleted", err)
}
