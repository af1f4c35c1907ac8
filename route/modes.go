package route

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

var paceScript = script("pace")

// Fields of room:state:{room}.
const (
	stateVer     = "ver"
	stateSlow    = "slow"
	stateMembers = "members"
	stateUnique  = "unique"
)

// StatePatch is a change of a room's settings: nil fields stay as they are.
type StatePatch struct {
	SlowSeconds   *int
	MembersOnly   *bool
	UniqueSeconds *int
}

// RoomState reads room's settings; a room never set has the zero state
// (Ver 0, every mode off).
func (s *Store) RoomState(ctx context.Context, room string) (danmaku.RoomState, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return danmaku.RoomState{}, err
	}
	h, err := s.rdb.HGetAll(ctx, roomStateKey(room)).Result()
	if err != nil {
		return danmaku.RoomState{}, wrap("room state", err)
	}
	return stateOf(h), nil
}

// SetRoomState applies p to room's settings and returns them as they are
// after it, with the next Ver: the fields, the version and the read are
// one MULTI on the room's key, so two moderators changing the room at once
// get two versions, each answer the state its change made.
func (s *Store) SetRoomState(ctx context.Context, room string, p StatePatch) (danmaku.RoomState, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return danmaku.RoomState{}, err
	}
	var fields []any
	if p.SlowSeconds != nil {
		fields = append(fields, stateSlow, *p.SlowSeconds)
	}
	if p.MembersOnly != nil {
		fields = append(fields, stateMembers, boolField(*p.MembersOnly))
	}
	if p.UniqueSeconds != nil {
		fields = append(fields, stateUnique, *p.UniqueSeconds)
	}
	key := roomStateKey(room)
	var all *redis.MapStringStringCmd
	_, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		if len(fields) > 0 {
			pipe.HSet(ctx, key, fields...)
		}
		pipe.HIncrBy(ctx, key, stateVer, 1)
		all = pipe.HGetAll(ctx, key)
		return nil
	})
	if err != nil {
		return danmaku.RoomState{}, wrap("set room state", err)
	}
	return stateOf(all.Val()), nil
}

func boolField(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// stateOf decodes room:state:{room}; a field that does not parse reads as
// off.
func stateOf(h map[string]string) danmaku.RoomState {
	num := func(f string) int64 {
		n, _ := strconv.ParseInt(h[f], 10, 64)
		return n
	}
	return danmaku.RoomState{
		Ver:           num(stateVer),
		SlowSeconds:   int(num(stateSlow)),
		MembersOnly:   h[stateMembers] == "1",
		UniqueSeconds: int(num(stateUnique)),
	}
}

// Pace is the slow-mode and unique-chat check of one send to Room by
// User: Slow is the room's slow mode (0: off), Unique its unique chat (0:
// off) and Plain the plain form of each content (what unique chat
// compares).
type Pace struct {
	Room, User string
	Slow       time.Duration
	Unique     time.Duration
	Plain      []string
}

// PaceVerdict is Pace's answer: Wait > 0 when slow mode refuses (what the
// user's interval still lasts), Repeat >= 0 when unique chat refuses (the
// index of the first content that repeats one of the last Unique, or an
// earlier one of the same send).
type PaceVerdict struct {
	Wait   time.Duration
	Repeat int
}

// Allowed reports whether the send may go.
func (v PaceVerdict) Allowed() bool { return v.Wait <= 0 && v.Repeat < 0 }

// CheckPace runs the room modes' check of p in one script on the room's
// shard: it refuses a send within the user's slow-mode interval or
// repeating a content of the room's unique-chat interval, and otherwise
// sets the user's mark (PX Slow) and each content's (PX Unique). A refused
// send sets nothing. Contents are keyed by a digest of their plain form,
// so any text makes a short key.
func (s *Store) CheckPace(ctx context.Context, p Pace) (PaceVerdict, error) {
	v := PaceVerdict{Repeat: -1}
	if err := checkIDs("room", p.Room, "user", p.User); err != nil {
		return v, err
	}
	keys := []string{slowKey(p.Room, p.User)}
	if p.Unique > 0 {
		for _, c := range p.Plain {
			sum := sha256.Sum256([]byte(c))
			keys = append(keys, uniqueKey(p.Room, hex.EncodeToString(sum[:16])))
		}
	}
	res, err := paceScript.Run(ctx, s.rdb, keys, p.Slow.Milliseconds(), p.Unique.Milliseconds()).Int64Slice()
	if err != nil {
		return v, wrap("pace", err)
	}
	if len(res) != 2 {
		return v, danmaku.Errorf(danmaku.EINTERNAL, "", "pace returned %d values", len(res))
	}
	switch res[0] {
	case 1:
		v.Wait = time.Duration(res[1]) * time.Millisecond
	case 2:
		v.Repeat = int(res[1])
	}
	return v, nil
}
