package job

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
)

// heldLister lists the messages this job holds for their room's delay in
// Redis (route.PublishHeld), where logic reads them for moderators: the
// scheduler hands it each message it holds (add, which never blocks) and
// one goroutine writes them, per room, in one call each round. The list
// is for moderators only: a write that fails costs the entries (logged),
// not the messages, which are held and released as ever.
type heldLister struct {
	cfg   Config
	store Store
	log   *zap.Logger

	mu    sync.Mutex
	rooms map[string][]danmaku.HeldItem
	n     int
	wake  chan struct{}
}

// maxHeldListed bounds the entries waiting to be written; beyond, more
// are left out of the list until the goroutine catches up.
const maxHeldListed = 100000

func newHeldLister(cfg Config, store Store, log *zap.Logger) *heldLister {
	return &heldLister{cfg: cfg, store: store, log: log, rooms: map[string][]danmaku.HeldItem{}, wake: make(chan struct{}, 1)}
}

// add lists m, held in room until at.
func (l *heldLister) add(room string, m danmaku.Message, at time.Time) {
	l.mu.Lock()
	if l.n < maxHeldListed {
		l.rooms[room] = append(l.rooms[room], danmaku.HeldItem{ID: m.ID, UID: m.UID, Name: m.Name,
			Content: m.Content, TS: m.TS, ReleaseAt: at.UnixMilli()})
		l.n++
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run writes what add listed until ctx ends.
func (l *heldLister) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		l.mu.Lock()
		rooms := l.rooms
		l.rooms, l.n = map[string][]danmaku.HeldItem{}, 0
		l.mu.Unlock()
		for room, items := range rooms {
			wctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
			err := l.store.PublishHeld(wctx, room, items)
			cancel()
			if err != nil {
				l.log.Warn("list held messages for moderators", zap.String("room", room), zap.Int("messages", len(items)), zap.Error(err))
			}
		}
	}
}
