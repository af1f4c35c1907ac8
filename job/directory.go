package job

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/route"
)

// cometDirectory knows which comets a delivery may push to: it caches the
// comets with a current lease (reread every CometRefresh), leaves out for a
// while the comets that failed a push (Quarantine), and runs the janitor
// that removes the routes of comets whose lease expired. Safe for
// concurrent use.
type cometDirectory struct {
	cfg   Config
	store Store
	log   *zap.Logger

	live      atomic.Pointer[map[string]route.CometInfo]
	refreshed atomic.Int64 // unix nanoseconds of the last on-demand reread

	mu          sync.Mutex
	quarantined map[string]time.Time // comet id -> left out until
	authLogged  map[string]time.Time // comet id -> last 401 logged
}

// authLogEvery is how often a comet refusing the push secret is logged.
const authLogEvery = time.Minute

func newCometDirectory(cfg Config, store Store, log *zap.Logger) *cometDirectory {
	d := &cometDirectory{cfg: cfg, store: store, log: log, quarantined: map[string]time.Time{},
		authLogged: map[string]time.Time{}}
	empty := map[string]route.CometInfo{}
	d.live.Store(&empty)
	return d
}

// run keeps the cache fresh and, on the janitor interval, removes the
// routes of comets whose lease expired, until ctx ends.
func (d *cometDirectory) run(ctx context.Context) {
	refresh := time.NewTicker(d.cfg.CometRefresh)
	defer refresh.Stop()
	var janitor <-chan time.Time
	if d.cfg.JanitorInterval > 0 {
		t := time.NewTicker(d.cfg.JanitorInterval)
		defer t.Stop()
		janitor = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
			d.refresh(ctx)
		case <-janitor:
			d.removeDead(ctx)
		}
	}
}

// refresh rereads the comets with a current lease. On failure the cache
// keeps its last answer.
func (d *cometDirectory) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.CometRefreshTimeout)
	defer cancel()
	live, err := d.store.LiveComets(ctx)
	if err != nil {
		d.log.Debug("list live comets", zap.Error(err))
		return
	}
	d.live.Store(&live)
}

// removeDead is one janitor pass.
func (d *cometDirectory) removeDead(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.JanitorTimeout)
	defer cancel()
	dead, err := d.store.DeadComets(ctx)
	if err != nil {
		return
	}
	for _, id := range dead {
		n, renewed, err := d.store.RemoveDeadComet(ctx, id)
		if err != nil {
			d.log.Warn("remove dead comet", zap.String("comet", id), zap.Error(err))
			continue
		}
		if renewed {
			d.log.Info("dead comet renewed its lease; what it registered since stays",
				zap.String("comet", id), zap.Int("connections_removed_before", n))
			continue
		}
		d.log.Info("removed routes of dead comet", zap.String("comet", id), zap.Int("connections", n))
	}
}

// targets returns the comets among a room's (cometID -> viewers) that hold
// a current lease and are not left out, and how many comets were skipped
// for having no lease and for being left out. A comet the cache does not
// know may have started since the last refresh: the cache is reread first
// (at most once per refreshGap), so a new comet's first viewers are not
// taken for nobody.
func (d *cometDirectory) targets(ctx context.Context, room map[string]int64) (out []route.CometInfo, noLease, quarantined int) {
	live := *d.live.Load()
	for id := range room {
		if _, ok := live[id]; !ok {
			d.refreshSoon(ctx)
			live = *d.live.Load()
			break
		}
	}
	for id := range room {
		c, ok := live[id]
		switch {
		case !ok:
			noLease++
		case d.isQuarantined(id):
			quarantined++
		default:
			out = append(out, c)
		}
	}
	return out, noLease, quarantined
}

// refusedSecret reports a comet that answered 401 to a push and whether
// the caller is to log it: once per comet per authLogEvery.
func (d *cometDirectory) refusedSecret(id string) bool {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if last, ok := d.authLogged[id]; ok && now.Sub(last) < authLogEvery {
		return false
	}
	d.authLogged[id] = now
	return true
}

// refreshGap bounds the on-demand rereads of the live comets: a room routed
// to a comet whose lease is gone costs one reread per refreshGap, not one
// per delivery.
const refreshGap = 100 * time.Millisecond

// refreshSoon rereads the live comets unless that was done within
// refreshGap; concurrent callers let one of them do it.
func (d *cometDirectory) refreshSoon(ctx context.Context) {
	last := d.refreshed.Load()
	now := time.Now().UnixNano()
	if now-last < int64(refreshGap) || !d.refreshed.CompareAndSwap(last, now) {
		return
	}
	d.refresh(ctx)
}

// quarantine leaves the comets out of deliveries for Quarantine.
func (d *cometDirectory) quarantine(ids []string) {
	until := time.Now().Add(d.cfg.Quarantine)
	d.mu.Lock()
	for _, id := range ids {
		d.quarantined[id] = until
	}
	d.mu.Unlock()
}

func (d *cometDirectory) isQuarantined(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	until, ok := d.quarantined[id]
	if ok && time.Now().After(until) {
		delete(d.quarantined, id)
		return false
	}
	return ok
}
