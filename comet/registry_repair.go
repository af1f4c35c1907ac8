package comet

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/route"
)

// bulkSlice is the number of connections of one RegisterAll call in a
// re-registration. Each call sends its pipelines one after the other, so a
// repair keeps one pipeline in flight and Redis serves other clients
// between them; each call gets its own Redis timeout.
const bulkSlice = 2000

// The registry repairs, the kind label of repairs_total.
const (
	regReregister = "reregister" // Redis lost this comet's lease: every route written again
	regReconcile  = "reconcile"  // anti-entropy, or a count that disagreed at renewal
	regLeftover   = "leftover"   // routes of an earlier process with this id, removed at start
)

// takeOver prepares Redis before the comet serves anyone: it removes the
// routes an earlier process with the same id left behind (killed without a
// graceful shutdown, so its viewers are gone) and takes the lease.
func (s *Server) takeOver(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 2*s.cfg.RedisTimeout)
	defer cancel()
	n, err := s.rt.RemoveComet(rctx, s.id)
	if err != nil {
		return err
	}
	if n > 0 {
		s.metrics.registryRepaired(regLeftover, route.Repair{Removed: n})
		s.log.Warn("removed routes left by an earlier process with this comet id", zap.String("id", s.id), zap.Int("connections", n))
	}
	st, err := s.rt.Heartbeat(rctx, s.leaseInfo(), s.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	s.redisOK.Store(true)
	s.registered.Store(st.Registered)
	s.leased.Store(true)
	return nil
}

// registryCounts returns the routes the comet holds and the number Redis
// listed for it at the last lease renewal or repair.
func (s *Server) registryCounts() (held, registered int64) {
	return s.held.Load(), s.registered.Load()
}

func (s *Server) leaseInfo() route.CometInfo {
	return route.CometInfo{ID: s.id, Addr: s.advertise, Started: s.started}
}

// leaseLoop renews the lease every LeaseRenew, re-registering every viewer
// when Redis lost the comet's state, and reconciles every
// ReconcileInterval. Both run while no registry worker does (see
// registry.exclusive). Shutdown waits for it before it removes the routes.
func (s *Server) leaseLoop() {
	defer s.bg.Done()
	defer close(s.leaseDone)
	renew := time.NewTicker(s.cfg.LeaseRenew)
	defer renew.Stop()
	reconcile := time.NewTicker(s.cfg.ReconcileInterval)
	defer reconcile.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-renew.C:
			s.reg.exclusive(s.renew)
		case <-reconcile.C:
			s.reg.exclusive(func() { s.reconcile("interval") })
		}
	}
}

// renew takes over when Start could not (Redis did not answer then), else
// renews the lease. The caller holds the registry alone.
func (s *Server) renew() {
	if s.leased.Load() {
		s.heartbeat()
		return
	}
	if err := s.takeOver(context.Background()); err != nil {
		s.metrics.leaseError()
		s.log.Warn("take lease: redis does not answer", zap.Error(err))
		return
	}
	s.log.Info("redis answers: lease taken", zap.String("id", s.id))
	s.heartbeat() // settles routes of viewers that joined meanwhile
}

// heartbeat renews the lease and compares what Redis lists for the comet
// with what it holds. When the lease was lost (Redis restarted empty,
// flushed, failed over to a replica behind, or the lease expired in a
// stall) every held route is written again; when only the number of routes
// disagrees, or a registry call failed since the last reconcile (what it
// left in Redis is unknown), a reconcile settles it. A repair that failed
// is tried again at the next renewal. The caller holds the registry alone.
func (s *Server) heartbeat() {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	st, err := s.rt.Heartbeat(ctx, s.leaseInfo(), s.cfg.LeaseTTL)
	cancel()
	if err != nil {
		s.redisOK.Store(false)
		s.metrics.leaseError()
		s.log.Warn("renew lease", zap.Error(err))
		return
	}
	s.redisOK.Store(true)
	s.registered.Store(st.Registered)
	switch {
	case st.Lost || s.rebuilding.Load():
		s.reregister(s.reg.heldConns(), st.Lost)
	case st.Registered != s.reg.heldN.Load(): // a count: the routes are copied only to be written again
		s.reconcile("count")
	case s.reg.unsure.Load():
		s.reconcile("error")
	}
}

// reregister writes every held route again with RegisterAll, bulkSlice
// connections per call. The comet is not ready meanwhile.
func (s *Server) reregister(held []route.Conn, lost bool) {
	if lost && !s.rebuilding.Load() {
		s.log.Warn("redis lost this comet's routes; registering every viewer again",
			zap.String("id", s.id), zap.Int("connections", len(held)))
	}
	s.rebuilding.Store(true)
	start := time.Now()
	added := 0
	for i := 0; i < len(held); i += bulkSlice {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
		n, err := s.rt.RegisterAll(ctx, s.id, held[i:min(i+bulkSlice, len(held))])
		cancel()
		added += n
		if err != nil {
			s.metrics.registryError()
			s.log.Warn("register viewers again; retrying at the next lease renewal",
				zap.Int("done", i), zap.Int("connections", len(held)), zap.Error(err))
			return
		}
	}
	s.registered.Store(int64(len(held)))
	s.rebuilding.Store(false)
	s.metrics.registryRepaired(regReregister, route.Repair{Added: added})
	s.log.Info("viewers registered again", zap.Int("connections", len(held)), zap.Int("added", added),
		zap.Duration("took", time.Since(start)))
}

// reconcile makes Redis agree with the held routes (route.Reconcile) and
// reports what it fixed. The caller holds the registry alone, so no
// registry call runs meanwhile: one that failed before is settled by it,
// one that fails after marks the registry unsure again.
func (s *Server) reconcile(why string) {
	s.reg.unsure.Store(false)
	held := s.reg.heldConns()
	// A clean comet costs about one round trip per 500 connections.
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout*time.Duration(2+len(held)/bulkSlice))
	defer cancel()
	start := time.Now()
	rep, err := s.rt.Reconcile(ctx, s.id, held)
	if err != nil {
		s.metrics.registryError()
		s.reg.unsure.Store(true)
		s.log.Warn("reconcile routes", zap.String("trigger", why), zap.Error(err))
		return
	}
	s.registered.Store(int64(len(held)))
	s.metrics.registryRepaired(regReconcile, rep)
	if rep.Changed() {
		s.log.Info("routes reconciled", zap.String("trigger", why), zap.Int("added", rep.Added),
			zap.Int("removed", rep.Removed), zap.Int("rooms_corrected", rep.Corrected),
			zap.Int("connections", len(held)), zap.Duration("took", time.Since(start)))
	}
}

// Ready reports whether the comet can serve viewers as job sees them: it
// is not shutting down, Redis answers, and the registry is not being
// rebuilt. /readyz answers 503 with the error otherwise.
func (s *Server) Ready(ctx context.Context) error {
	switch {
	case s.isClosing():
		return errShuttingDown
	case s.rebuilding.Load():
		return errRebuilding
	case !s.redisOK.Load():
		return errRedisDown
	}
	if err := s.canary.stale(time.Now()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	return s.rt.Ping(ctx)
}
