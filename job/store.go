package job

import (
	"context"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// Store is what job does in Redis: the delivery guards of room batches,
// events and notices, and the comets' leases. route.Store implements it;
// the keys and scripts behind each call are route's.
type Store interface {
	Ping(ctx context.Context) error

	// Room batches and events (deliverer, releaser).
	BeginBroadcast(ctx context.Context, room string, msgs []danmaku.Message, o route.BeginOptions) (route.Begin, error)
	BeginEvent(ctx context.Context, ev danmaku.Event, o route.EventOptions) (route.Begin, error)
	RenewLock(ctx context.Context, l *route.Lock, ttl time.Duration) error
	ReleaseLock(ctx context.Context, l *route.Lock) error
	EndBroadcast(ctx context.Context, l *route.Lock, ids []string, ttl time.Duration) error
	AbortBroadcast(ctx context.Context, room, owner string, tokens, ids []string) (bool, int, error)

	// PublishHeld lists a room's held messages for moderators (hold.go).
	PublishHeld(ctx context.Context, room string, items []danmaku.HeldItem) error

	// Notices to users and to everyone.
	BeginNotices(ctx context.Context, claims []route.NoticeClaim, o route.NoticeOptions) (route.NoticeBegin, error)
	EndNotices(ctx context.Context, claims []route.NoticeClaim, ttl time.Duration) error

	// Comet leases (cometDirectory and its janitor).
	LiveComets(ctx context.Context) (map[string]route.CometInfo, error)
	DeadComets(ctx context.Context) ([]string, error)
	RemoveDeadComet(ctx context.Context, comet string) (removed int, renewed bool, err error)
}

var _ Store = (*route.Store)(nil)
