package route

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/redis/go-redis/v9"
)

// Default guard durations, as in the original design.
const (
	DefaultProcessedTTL = 60 * time.Second
	DefaultCooldown     = time.Second
	DefaultLockTTL      = 5 * time.Second
)

// ClaimState is the outcome of claiming one message id.
type ClaimState int

const (
	// Claimed: the caller owns the message now and must deliver it, then
	// MarkProcessed (or ReleaseClaims when delivery failed).
	Claimed ClaimState = iota
	// Processed: delivered before; skip it.
	Processed
	// Busy: another owner claimed it and has neither finished nor let the
	// claim expire; try again after a while.
	Busy
)

func (c ClaimState) String() string {
	switch c {
	case Claimed:
		return "claimed"
	case Processed:
		return "processed"
	case Busy:
		return "busy"
	}
	return "unknown"
}

func (s *Store) processedKeys(room string, ids []string) ([]string, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		if err := danmaku.CheckID("msgId", id); err != nil {
			return nil, err
		}
		keys[i] = processedKey(room, id)
	}
	return keys, nil
}

// Claim marks the message ids of room as being delivered by owner, for at
// most claimTTL, in one round trip. A consumer that crashes after Claim
// leaves only a claim that expires, never a "processed" mark for a message
// it did not push: that is the difference from the original design's SET NX
// before pushing. The result has one state per id.
func (s *Store) Claim(ctx context.Context, room string, ids []string, owner string, claimTTL time.Duration) ([]ClaimState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys, err := s.processedKeys(room, ids)
	if err != nil {
		return nil, err
	}
	if err := danmaku.CheckID("owner", owner); err != nil {
		return nil, err
	}
	res, err := claimScript.Run(ctx, s.rdb, keys, owner, claimTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, wrap("claim", err)
	}
	out := make([]ClaimState, len(res))
	for i, v := range res {
		out[i] = ClaimState(v)
	}
	return out, nil
}

// MarkProcessed records the ids of room as delivered for ttl (60 s by
// default): redeliveries within that time are skipped. One round trip.
func (s *Store) MarkProcessed(ctx context.Context, room string, ids []string, ttl time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	keys, err := s.processedKeys(room, ids)
	if err != nil {
		return err
	}
	_, err = s.execPipe(ctx, "mark processed", func(p redis.Pipeliner) {
		for _, k := range keys {
			p.Set(ctx, k, "done", ttl)
		}
	})
	return err
}

// ReleaseClaims drops owner's claims on ids so that a retry, by this or
// another consumer, need not wait for them to expire. Claims of other owners
// and processed marks are left alone.
func (s *Store) ReleaseClaims(ctx context.Context, room string, ids []string, owner string) error {
	if len(ids) == 0 {
		return nil
	}
	keys, err := s.processedKeys(room, ids)
	if err != nil {
		return err
	}
	return wrap("release claims", releaseClaimsScript.Run(ctx, s.rdb, keys, owner).Err())
}

// Cooldown opens room's broadcast window of length window if none is
// running. It returns ok when the caller opened it, otherwise how long the
// running window still lasts. Millisecond resolution.
func (s *Store) Cooldown(ctx context.Context, room string, window time.Duration) (ok bool, remaining time.Duration, err error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return false, 0, err
	}
	ms, err := cooldownScript.Run(ctx, s.rdb, []string{cooldownKey(room)}, max(window.Milliseconds(), 1)).Int64()
	if err != nil {
		return false, 0, wrap("cooldown", err)
	}
	if ms == 0 {
		return true, window, nil
	}
	return false, time.Duration(ms) * time.Millisecond, nil
}

// ErrLocked reports that the broadcast lock of a room is held by somebody
// else: retry shortly.
var ErrLocked = &danmaku.Error{Code: danmaku.ECONFLICT, Field: "lock", Message: "broadcast lock held by another owner"}

// ErrNotHolder reports a renew or release of a lock the caller no longer
// holds (it expired, and maybe somebody else took it).
var ErrNotHolder = &danmaku.Error{Code: danmaku.ECONFLICT, Field: "lock", Message: "lock not held by this owner"}

// Lock is one acquisition of a room's broadcast lock. The token is unique
// per acquisition, so a holder can never release a later holder's lock.
type Lock struct {
	Room  string
	Token string
}

// AcquireLock takes room's broadcast lock for ttl. It returns ErrLocked when
// somebody else holds it.
func (s *Store) AcquireLock(ctx context.Context, room string, ttl time.Duration) (*Lock, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	l := &Lock{Room: room, Token: newToken()}
	err := s.rdb.SetArgs(ctx, lockKey(room), l.Token, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	if errors.Is(err, redis.Nil) {
		return nil, ErrLocked
	}
	if err != nil {
		return nil, wrap("acquire lock", err)
	}
	return l, nil
}

// newToken returns a lock token unique to one acquisition.
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RenewLock extends l to ttl from now. ErrNotHolder when l was lost.
func (s *Store) RenewLock(ctx context.Context, l *Lock, ttl time.Duration) error {
	n, err := lockRenewScript.Run(ctx, s.rdb, []string{lockKey(l.Room)}, l.Token, ttl.Milliseconds()).Int64()
	if err != nil {
		return wrap("renew lock", err)
	}
	if n == 0 {
		return ErrNotHolder
	}
	return nil
}

// ReleaseLock deletes l if, and only if, the caller still holds it.
// ErrNotHolder when it had already expired or passed to another holder.
func (s *Store) ReleaseLock(ctx context.Context, l *Lock) error {
	n, err := lockReleaseScript.Run(ctx, s.rdb, []string{lockKey(l.Room)}, l.Token).Int64()
	if err != nil {
		return wrap("release lock", err)
	}
	if n == 0 {
		return ErrNotHolder
	}
	return nil
}
