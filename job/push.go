package job

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// Pusher sends one encoded batch to one comet's internal endpoint and
// returns how many viewers it reached. push.Client implements it.
type Pusher interface {
	Push(ctx context.Context, addr string, body []byte) (int, error)
}

// push sends body, a room's msgs frame of n messages or one of its events
// (n 0: the message counters leave events out), to every comet of the room
// (cometID -> viewers) that holds a lease and is not left out, in
// parallel, renewing the lock while pushes run. It reports whether the
// body counts as delivered: every comet took it, or some did (the ones
// that failed are left out for a while and their share counted as
// dropped), or giveUp is set. When every comet failed the body is to be
// retried as a whole.
func (d *deliverer) push(ctx context.Context, lock *route.Lock, body []byte, msgs int, counts map[string]int64, giveUp bool) bool {
	targets, noLease, quarantined := d.comets.targets(ctx, counts)
	n := float64(msgs)
	if len(counts) == 0 {
		d.m.undelivered.WithLabelValues(undeliveredNoComets).Add(n)
	}
	d.m.undelivered.WithLabelValues(undeliveredNoLease).Add(n * float64(noLease))
	d.m.undelivered.WithLabelValues(undeliveredQuarantined).Add(n * float64(quarantined))
	if len(targets) == 0 {
		return true // nobody reachable watching: delivered to all zero viewers
	}
	errs := d.pushAll(ctx, lock, targets, func(int) []byte { return body })
	return d.settle(targets, errs, func(int) int { return msgs }, giveUp)
}

// settle judges the pushes of one delivery to targets (errs[i] is the
// outcome of targets[i]) and reports whether the delivery counts as done:
// every comet took its body, or some did, or giveUp is set. When every
// comet failed it is to be retried as a whole. share(i) is how many
// messages the body of targets[i] carried.
func (d *deliverer) settle(targets []route.CometInfo, errs []error, share func(i int) int, giveUp bool) bool {
	var failed []string
	var reasons []string
	var shares []int
	for i, err := range errs {
		if err != nil {
			failed = append(failed, targets[i].ID)
			reasons = append(reasons, d.pushFailure(targets[i], err))
			shares = append(shares, share(i))
		}
	}
	switch {
	case len(failed) == 0:
		return true
	case len(failed) == len(targets) && !giveUp:
		// Nothing went out: most likely our side of the network.
		return false
	}
	// Some comets took the batch. A comet that failed every attempt is left
	// out for a while so it cannot slow the room down again; its share of
	// the batch is counted as dropped. If it is really gone its lease ends
	// and the janitor removes its routes; its viewers reconnect elsewhere.
	d.comets.quarantine(failed)
	lost := 0
	for k, r := range reasons {
		d.m.undelivered.WithLabelValues(r).Add(float64(shares[k]))
		lost += shares[k]
	}
	d.m.dropped.WithLabelValues("comet_failed").Add(float64(lost))
	d.log.Warn("comet failed; left out for a while", zap.Strings("comets", failed), zap.Strings("reasons", reasons),
		zap.Duration("for", d.cfg.Quarantine))
	return true
}

// pushFailure returns the undelivered reason of a failed push to c and
// logs, once per comet per minute, a comet that refused the push secret.
func (d *deliverer) pushFailure(c route.CometInfo, err error) string {
	switch danmaku.ErrorCode(err) {
	case danmaku.EUNAVAILABLE:
		return undeliveredUnavailable
	case danmaku.EUNAUTH:
		if d.comets.refusedSecret(c.ID) {
			d.log.Error("comet answered 401 to a push: job.push_secret differs from the comet's comet.secret (likely cause); "+
				"its viewers get nothing until both are the same", zap.String("comet", c.ID), zap.String("addr", c.Addr), zap.Error(err))
		}
		return undeliveredUnauth
	}
	return undeliveredRejected
}

// pushAll pushes body(i) to targets[i], one goroutine per comet when there
// are several, renewing lock (when not nil) while they run, and returns
// each push's error.
func (d *deliverer) pushAll(ctx context.Context, lock *route.Lock, targets []route.CometInfo, body func(i int) []byte) []error {
	errs := make([]error, len(targets))
	if len(targets) == 1 {
		errs[0] = d.pushOne(ctx, targets[0], body(0))
		return errs
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.pushOne(ctx, c, body(i))
		}()
	}
	go func() { wg.Wait(); close(done) }()
	d.waitRenewing(ctx, lock, done)
	return errs
}

// waitRenewing waits for done, renewing the broadcast lock every third of
// its TTL so a push that takes long does not lose it. Without a lock it
// only waits.
func (d *deliverer) waitRenewing(ctx context.Context, lock *route.Lock, done <-chan struct{}) {
	if lock == nil {
		<-done
		return
	}
	renew := time.NewTicker(d.cfg.LockTTL / 3)
	defer renew.Stop()
	for {
		select {
		case <-done:
			return
		case <-renew.C:
			rctx, cancel := context.WithTimeout(ctx, d.cfg.LockRenewTimeout)
			if err := d.store.RenewLock(rctx, lock, d.cfg.LockTTL); err != nil {
				d.log.Debug("renew lock", zap.String("room", lock.Room), zap.Error(err))
			}
			cancel()
		}
	}
}

// pushOne pushes body to one comet, up to PushAttempts times while the
// comet is unavailable; a rejection (a 4xx answer) will not change on retry.
func (d *deliverer) pushOne(ctx context.Context, c route.CometInfo, body []byte) error {
	var err error
	for attempt := 0; attempt < d.cfg.PushAttempts; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, d.cfg.PushTimeout)
		start := time.Now()
		_, err = d.pusher.Push(pctx, c.Addr, body)
		cancel()
		d.m.observePush(time.Since(start), err)
		if err == nil {
			return nil
		}
		if danmaku.ErrorCode(err) != danmaku.EUNAVAILABLE || ctx.Err() != nil {
			break
		}
	}
	d.log.Debug("push failed", zap.String("comet", c.ID), zap.Error(err))
	return err
}
