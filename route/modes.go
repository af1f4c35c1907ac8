package route

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

var (
	paceScript = script("pace")
	pinScript  = script("pin")
)

// Fields of room:state:{room}.
const (
	stateVer     = "ver"
	stateSlow    = "slow"
	stateMembers = "members"
	stateUnique  = "unique"
	stateDelay   = "delay"
	stateReview  = "review"
)

// StatePatch is a change of a room's settings: nil fields stay as they are.
type StatePatch struct {
	SlowSeconds   *int
	MembersOnly   *bool
	UniqueSeconds *int
	DelaySeconds  *int
	Review        *bool
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
	if p.DelaySeconds != nil {
		fields = append(fields, stateDelay, *p.DelaySeconds)
	}
	if p.Review != nil {
		fields = append(fields, stateReview, boolField(*p.Review))
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
		DelaySeconds:  int(num(stateDelay)),
		Review:        h[stateReview] == "1",
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

// AppendAudit adds entry to the audit log of admin actions, which keeps
// the newest keep: one pipelined LPUSH and LTRIM.
func (s *Store) AppendAudit(ctx context.Context, entry []byte, keep int) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, auditKey, entry)
		p.LTrim(ctx, auditKey, 0, int64(keep)-1)
		return nil
	})
	return wrap("append audit", err)
}

// Audit returns the newest n entries of the audit log, newest first.
func (s *Store) Audit(ctx context.Context, n int) ([][]byte, error) {
	vals, err := s.rdb.LRange(ctx, auditKey, 0, int64(n)-1).Result()
	if err != nil {
		return nil, wrap("audit", err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// Room is what logic's send check reads of a room in one HGETALL: its
// settings and its hidden users (shadow hide), each with the end of the
// hide in Unix milliseconds. The hidden users are never sent to viewers.
type Room struct {
	State  danmaku.RoomState
	Hidden map[string]int64
	// Pin is the room's pin, nil when none (it may have ended: see
	// Pin.Until); PinVer is the version of the last pin or unpin.
	Pin    *danmaku.Pin
	PinVer int64
	// Words is the room's edited blocked words with their modes (nil when
	// none), WordsSum their digest (route.WordsSum).
	Words    map[string]string
	WordsSum string
}

// HiddenUntil is when user's hide in r ends (Unix ms); 0 when not hidden
// at now.
func (r Room) HiddenUntil(user string, now time.Time) int64 {
	if until := r.Hidden[user]; until > now.UnixMilli() {
		return until
	}
	return 0
}

// ReadRoom reads room's settings and hidden users.
func (s *Store) ReadRoom(ctx context.Context, room string) (Room, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return Room{}, err
	}
	h, err := s.rdb.HGetAll(ctx, roomStateKey(room)).Result()
	if err != nil {
		return Room{}, wrap("read room", err)
	}
	r := Room{State: stateOf(h)}
	r.PinVer, _ = strconv.ParseInt(h["pinver"], 10, 64)
	if js, ok := h["pin"]; ok {
		var p danmaku.Pin
		if json.Unmarshal([]byte(js), &p) == nil {
			p.Ver = r.PinVer
			r.Pin = &p
		}
	}
	r.Words = wordsOf(h)
	r.WordsSum = WordsSum(r.Words)
	for f, v := range h {
		if user, ok := strings.CutPrefix(f, hiddenField); ok {
			if r.Hidden == nil {
				r.Hidden = map[string]int64{}
			}
			r.Hidden[user], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return r, nil
}

// hiddenField prefixes the fields of room:state:{room} that hold a hidden
// user's id, valued the hide's end (Unix ms).
const hiddenField = "hide."

// Hide hides user in room until the time until: the user's messages to the
// room reach only the user's own connections. Hiding again replaces the
// end. It does not change the settings' version: viewers are not told.
// Ended hides are removed by the next Hide or Unhide of the room.
func (s *Store) Hide(ctx context.Context, user, room string, until time.Time) error {
	if err := checkIDs("user", user, "room", room); err != nil {
		return err
	}
	err := s.rdb.HSet(ctx, roomStateKey(room), hiddenField+user, until.UnixMilli()).Err()
	if err == nil {
		s.pruneHidden(ctx, room)
	}
	return wrap("hide", err)
}

// Unhide lifts user's hide in room and reports whether there was one.
func (s *Store) Unhide(ctx context.Context, user, room string) (bool, error) {
	if err := checkIDs("user", user, "room", room); err != nil {
		return false, err
	}
	n, err := s.rdb.HDel(ctx, roomStateKey(room), hiddenField+user).Result()
	if err == nil {
		s.pruneHidden(ctx, room)
	}
	return n > 0, wrap("unhide", err)
}

// pruneHidden removes the ended hides of room; best effort.
func (s *Store) pruneHidden(ctx context.Context, room string) {
	r, err := s.ReadRoom(ctx, room)
	if err != nil {
		return
	}
	now := time.Now()
	var ended []string
	for user := range r.Hidden {
		if r.HiddenUntil(user, now) == 0 {
			ended = append(ended, hiddenField+user)
		}
	}
	if len(ended) > 0 {
		s.rdb.HDel(ctx, roomStateKey(room), ended...)
	}
}

// SetPin pins p to room, replacing its pin, and returns it with its
// version (the next of the room's settings counter), in one script.
func (s *Store) SetPin(ctx context.Context, room string, p danmaku.Pin) (danmaku.Pin, error) {
	if err := checkIDs("room", room, "pin.id", p.ID); err != nil {
		return p, err
	}
	p.Ver = 0
	js, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	v, err := pinScript.Run(ctx, s.rdb, []string{roomStateKey(room)}, "pin", js, p.ID).Int64()
	if err != nil {
		return p, wrap("pin", err)
	}
	p.Ver = v
	return p, nil
}

// Unpin takes the pin of id away from room, and returns the version it
// got; 0 when id is not the room's pin (ended, replaced or never there).
func (s *Store) Unpin(ctx context.Context, room, id string) (int64, error) {
	if err := checkIDs("room", room, "pin.id", id); err != nil {
		return 0, err
	}
	v, err := pinScript.Run(ctx, s.rdb, []string{roomStateKey(room)}, "unpin", id).Int64()
	return v, wrap("unpin", err)
}
