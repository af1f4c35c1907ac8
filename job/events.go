package job

import (
	"context"
	"encoding/json"
	"errors"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// deliverEvent delivers one moderation event of req.room under the same
// rules as a message: BeginEvent claims its id and takes the room's lock
// (a del event turns the deleted messages of the room's history into
// tombstones in the same script), the event goes to every comet of the
// room, and only then is it marked processed and its offset finished. The
// scheduler sends an event alone and only once the room's messages before
// it are finished, so the messages it deletes were delivered (and are in
// the history) first. A duplicate finishes at once; a lock or claim held
// elsewhere waits, a failed push is retried with backoff, and what a
// BeginEvent that failed here may have taken is released, like a batch.
func (d *deliverer) deliverEvent(ctx context.Context, req *delivery, ev *danmaku.Event) outcome {
	v := make([]verdict, 1)
	bctx, cancel := context.WithTimeout(ctx, d.cfg.RedisTimeout)
	b, err := d.store.BeginEvent(bctx, *ev, route.EventOptions{Owner: d.owner, ClaimTTL: d.cfg.ClaimTTL, LockTTL: d.cfg.LockTTL})
	cancel()
	if err != nil {
		d.log.Debug("event postponed: redis", zap.String("room", req.room), zap.Error(err))
		d.m.retries.WithLabelValues("redis").Inc()
		d.release.add(req.room, b.Lock, ev.ID)
		return req.result(v, 0, true)
	}
	switch {
	case b.Status == route.LockedElsewhere:
		d.m.lockBusy.Inc()
		return req.result(v, d.cfg.LockRetry, false)
	case b.Status == route.NoneClaimable && b.States[0] == route.Processed:
		d.m.events.WithLabelValues(ev.Op, "duplicate").Inc()
		v[0] = finished
		return req.result(v, 0, false)
	case b.Status == route.NoneClaimable:
		d.m.retries.WithLabelValues("busy_claim").Inc()
		return req.result(v, d.cfg.RetryMin, false)
	}
	pushed := *ev
	pushed.Epoch, pushed.Dels, pushed.Sv = b.Epoch, b.Dels, b.Sv
	body, err := json.Marshal(pushed)
	ok := err == nil && d.push(ctx, b.Lock, body, 0, b.Comets, req.giveUp)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.RedisTimeout)
	defer cancel()
	if !ok {
		if err := d.store.ReleaseLock(ectx, b.Lock); err != nil && !errors.Is(err, route.ErrNotHolder) {
			d.log.Debug("release lock", zap.String("room", req.room), zap.Error(err))
		}
		d.m.retries.WithLabelValues("push").Inc()
		return req.result(v, 0, true)
	}
	if err := d.store.EndBroadcast(ectx, b.Lock, []string{ev.ID}, d.cfg.ProcessedTTL); err != nil && !errors.Is(err, route.ErrNotHolder) {
		// Delivered but not marked: a redelivery may push it again, which
		// comets and clients take as a no-op.
		d.log.Debug("end event", zap.String("room", req.room), zap.Error(err))
	}
	d.m.events.WithLabelValues(ev.Op, "delivered").Inc()
	// Events are moderators' actions, a few a minute at most: one line
	// each. Shadow events are a hidden user's messages, which may come
	// as fast as the user's rate limit: not logged.
	if ev.Op == danmaku.OpShadow {
		v[0] = finished
		return req.result(v, 0, false)
	}
	d.log.Info("moderation event delivered", zap.String("op", ev.Op), zap.String("room", ev.Room),
		zap.String("event", ev.ID), zap.Strings("ids", ev.IDs), zap.String("user", ev.User),
		zap.Int("comets", len(b.Comets)), zap.Int("tombstoned", b.Tombstoned))
	v[0] = finished
	return req.result(v, 0, false)
}
