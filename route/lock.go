package route

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/danmaku/danmaku"
)

var (
	lockRenewScript   = script("lock_renew")
	lockReleaseScript = script("lock_release")
)

// ErrNotHolder reports a renew or release of a lock the caller no longer
// holds (it expired, and maybe somebody else took it).
var ErrNotHolder = &danmaku.Error{Code: danmaku.ECONFLICT, Field: "lock", Message: "lock not held by this owner"}

// Lock is one acquisition of a room's broadcast lock (BeginBroadcast takes
// it). The token is unique per acquisition, so a holder can never release a
// later holder's lock.
type Lock struct {
	Room  string
	Token string
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
