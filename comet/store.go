package comet

import (
	"context"
	"time"

	"github.com/danmaku/danmaku/route"
)

// Store is what a comet does in Redis: register its viewers' routes, keep
// its lease and heal the registry, and read room timelines and counts.
// route.Store implements it; the keys and scripts behind each call are
// route's.
type Store interface {
	Ping(ctx context.Context) error

	// Routes of the comet's viewers (registry).
	RegisterMany(ctx context.Context, conns []route.Conn) ([]route.Registration, error)
	Unregister(ctx context.Context, c route.Conn) error
	Online(ctx context.Context, room string) (int64, error)

	// The lease and the registry's repair.
	Heartbeat(ctx context.Context, c route.CometInfo, ttl time.Duration) (route.LeaseState, error)
	RegisterAll(ctx context.Context, comet string, conns []route.Conn) (int, error)
	Reconcile(ctx context.Context, comet string, held []route.Conn) (route.Repair, error)
	RemoveComet(ctx context.Context, comet string) (int, error)
	ReleaseLease(ctx context.Context, comet string) error

	// Room timelines: gap repair, catch-up of new viewers, deletions.
	History(ctx context.Context, room string, since int64, limit int) (route.History, error)
	Heads(ctx context.Context, rooms []string) (map[string]route.Head, error)
	Deletions(ctx context.Context, room string, after int64) (epoch string, dels int64, ids []string, err error)

	// Room settings, read when a room's first viewer here joins.
	ReadRoom(ctx context.Context, room string) (route.Room, error)
}

var _ Store = (*route.Store)(nil)
