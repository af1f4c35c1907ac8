package job

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/route"
)

// releaser takes back what failed BeginBroadcast calls may have taken. A
// Begin that timed out in a Redis stall is still queued in Redis and runs
// when the stall ends: it then holds the room's lock with a token nobody
// uses, and the room would wait for LockTTL. The releaser remembers the
// tokens of those calls per room (and the ids of an event's claims) and,
// once Redis answers a ping sent after they failed (so their scripts have
// run), releases them with AbortBroadcast: the room is blocked for one
// retry at most. One goroutine for the job; an entry is dropped once its
// abort succeeded, or a lock and claim TTL after Redis answered, when what
// it took has expired anyway.
type releaser struct {
	cfg   Config
	owner string
	store Store
	m     *metrics
	log   *zap.Logger

	mu    sync.Mutex
	rooms map[string]*abandoned
	wake  chan struct{}
}

// abandoned is what the failed attempts of one room may hold.
type abandoned struct {
	tokens []string
	ids    map[string]struct{}
	// answered is when Redis first answered after these attempts: their
	// scripts had run by then, so whatever they took expires by itself a
	// lock or claim TTL later.
	answered time.Time
}

// maxTokens bounds the tokens kept per room. Attempts of a room fail about
// once per retry_max while Redis stalls, so this covers a stall of a few
// minutes; the tokens of later attempts replace the newest one, and a lock
// one of those took ends with lock_ttl.
const maxTokens = 128

func newReleaser(cfg Config, owner string, store Store, m *metrics, log *zap.Logger) *releaser {
	return &releaser{cfg: cfg, owner: owner, store: store, m: m, log: log,
		rooms: map[string]*abandoned{}, wake: make(chan struct{}, 1)}
}

// add records a failed attempt on room: its lock (nil when nothing was
// sent) and the ids of the event claims it tried to take. A batch passes
// none: its messages' claims are final (they hold the positions the
// attempt gave them) and AbortBroadcast leaves them.
func (r *releaser) add(room string, lock *route.Lock, eventIDs ...string) {
	if lock == nil {
		return
	}
	r.mu.Lock()
	a := r.rooms[room]
	if a == nil {
		a = &abandoned{ids: map[string]struct{}{}}
		r.rooms[room] = a
	}
	if len(a.tokens) < maxTokens {
		a.tokens = append(a.tokens, lock.Token)
	} else {
		a.tokens[maxTokens-1] = lock.Token
	}
	for _, id := range eventIDs {
		a.ids[id] = struct{}{}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run releases what add recorded until ctx ends.
func (r *releaser) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		failed, ok := r.releaseAll(ctx)
		if !ok {
			return
		}
		if failed {
			select { // do not spin on a Redis that answers pings only
			case <-ctx.Done():
				return
			case <-time.After(r.cfg.RetryMin):
			}
		}
	}
}

// releaseAll waits until Redis answers, then aborts every recorded room. It
// reports whether an abort failed (and was put back), and false when ctx
// ended.
func (r *releaser) releaseAll(ctx context.Context) (failed, ok bool) {
	// Take the entries before the ping: each failed before the ping was
	// sent, so its script reached Redis before the ping did.
	r.mu.Lock()
	pending := r.rooms
	r.rooms = map[string]*abandoned{}
	r.mu.Unlock()
	for {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.RedisTimeout)
		err := r.store.Ping(pctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return false, false
		case <-time.After(r.cfg.RetryMin):
		}
	}
	rooms, nclaims := 0, 0
	now := time.Now()
	for room, a := range pending {
		if a.answered.IsZero() {
			a.answered = now
		} else if now.Sub(a.answered) > max(r.cfg.LockTTL, r.cfg.ClaimTTL) {
			continue // what the attempts took has expired
		}
		ids := make([]string, 0, len(a.ids))
		for id := range a.ids {
			ids = append(ids, id)
		}
		actx, cancel := context.WithTimeout(ctx, r.cfg.RedisTimeout)
		released, claims, err := r.store.AbortBroadcast(actx, room, r.owner, a.tokens, ids)
		cancel()
		switch {
		case err != nil:
			r.log.Debug("release a failed attempt's lock; trying again", zap.String("room", room), zap.Error(err))
			r.putBack(room, a)
			failed = true
		case released:
			rooms++
			nclaims += claims
		}
	}
	if rooms > 0 {
		r.m.staleLocks.Add(float64(rooms))
		r.log.Info("released the locks of broadcast attempts that ran in Redis after they had failed",
			zap.Int("rooms", rooms), zap.Int("claims", nclaims))
	}
	return failed, true
}

// putBack records a again for the next round.
func (r *releaser) putBack(room string, a *abandoned) {
	r.mu.Lock()
	if cur := r.rooms[room]; cur != nil {
		// The newer attempts have not been answered yet: keep them with a
		// fresh answered time.
		cur.tokens = append(a.tokens, cur.tokens...)[:min(len(a.tokens)+len(cur.tokens), maxTokens)]
		for id := range a.ids {
			cur.ids[id] = struct{}{}
		}
	} else {
		r.rooms[room] = a
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
