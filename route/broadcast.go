package route

import (
	"context"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
)

var (
	beginBroadcastScript = mustScript("begin_broadcast")
	endBroadcastScript   = mustScript("end_broadcast")
)

func init() { allScripts = append(allScripts, beginBroadcastScript, endBroadcastScript) }

// BeginOptions are the durations of BeginBroadcast.
type BeginOptions struct {
	// Window is the cooldown to open; 0 skips the cooldown check (a
	// shutdown drain delivers what it holds at once).
	Window   time.Duration
	Owner    string
	ClaimTTL time.Duration
	LockTTL  time.Duration
}

// Begin is the outcome of BeginBroadcast. Exactly one of these holds:
// Lock != nil (deliver the Claimed ids to Comets, then EndBroadcast);
// Wait > 0 (the room's window runs that much longer); Locked (another owner
// broadcasts the room); or nothing claimable (see States).
type Begin struct {
	Lock   *Lock
	Wait   time.Duration
	Locked bool
	States []ClaimState     // one per id, when claims were tried
	Comets map[string]int64 // cometID -> viewers, with Lock
}

// BeginBroadcast runs the guards of one room batch in a single atomic
// script: the lock must be free, the cooldown window is opened, the ids are
// claimed for owner, and only if at least one was claimed the lock is taken
// and the room's comets are read. It is Cooldown, Claim, AcquireLock and
// RoomComets in one round trip instead of four, with the same keys and
// semantics, and it never opens a window or claims ids while another owner
// holds the lock.
func (s *Store) BeginBroadcast(ctx context.Context, room string, ids []string, o BeginOptions) (Begin, error) {
	var b Begin
	keys, err := s.processedKeys(room, ids)
	if err != nil {
		return b, err
	}
	if err := danmaku.CheckID("owner", o.Owner); err != nil {
		return b, err
	}
	keys = append([]string{lockKey(room), cooldownKey(room), roomCometsKey(room)}, keys...)
	token := newToken()
	res, err := beginBroadcastScript.Run(ctx, s.rdb, keys,
		o.Window.Milliseconds(), o.Owner, o.ClaimTTL.Milliseconds(), token, o.LockTTL.Milliseconds()).Slice()
	if err != nil {
		return b, wrap("begin broadcast", err)
	}
	if len(res) != 4 {
		return b, danmaku.Errorf(danmaku.EINTERNAL, "", "begin broadcast returned %d values", len(res))
	}
	status, _ := res[0].(int64)
	ms, _ := res[1].(int64)
	states, _ := res[2].([]any)
	for _, v := range states {
		n, _ := v.(int64)
		b.States = append(b.States, ClaimState(n))
	}
	switch status {
	case 0:
		b.Lock = &Lock{Room: room, Token: token}
		flat, _ := res[3].([]any)
		b.Comets = make(map[string]int64, len(flat)/2)
		for i := 0; i+1 < len(flat); i += 2 {
			id, _ := flat[i].(string)
			v, _ := flat[i+1].(string)
			if n, _ := strconv.ParseInt(v, 10, 64); n > 0 {
				b.Comets[id] = n
			}
		}
	case 1:
		b.Wait = time.Duration(ms) * time.Millisecond
	case 2:
		b.Locked = true
	}
	return b, nil
}

// EndBroadcast marks ids delivered for ttl and releases l, in one round
// trip. ErrNotHolder when the lock had already passed to somebody else (the
// marks are written all the same: the messages were delivered).
func (s *Store) EndBroadcast(ctx context.Context, l *Lock, ids []string, ttl time.Duration) error {
	keys, err := s.processedKeys(l.Room, ids)
	if err != nil {
		return err
	}
	keys = append([]string{lockKey(l.Room)}, keys...)
	n, err := endBroadcastScript.Run(ctx, s.rdb, keys, l.Token, ttl.Milliseconds()).Int64()
	if err != nil {
		return wrap("end broadcast", err)
	}
	if n == 0 {
		return ErrNotHolder
	}
	return nil
}
