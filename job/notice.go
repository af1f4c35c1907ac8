package job

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// Notices (danmaku.Notice: to one user, or to everyone) take the path of
// room messages with the room's parts left out: no window, no lock, no
// positions.
//
// The scheduler queues them in lanes instead of rooms: one lane of user
// notices per partition (a user's notices share a partition, so they stay
// in order) and one of broadcasts. A lane is delivered like a room, one
// delivery at a time, as soon as a worker is free: what arrives meanwhile
// goes out together in the next delivery (at most Budget notices), so the
// cost per notice falls as the rate rises. Offsets follow the same rule
// as messages: committed once every notice before them is finished.
//
// A delivery claims the notices' ids and reads their users' connections
// (user:online:{user}) in one round trip (route.BeginNotices), pushes one
// body per comet (the notices of every user with a connection there, or
// the broadcast notices to every comet with a lease), and marks the
// delivered ids (route.EndNotices). A user without a connection on a live
// comet is counted (dropped, reason "no_route") and finished, not
// retried. Pushes fail and are retried like a room's: when every comet
// failed the delivery is retried with backoff (and each retry reads the
// users' connections again, so a viewer that reconnected to another comet
// meanwhile gets the notice there); when some comets took it, the ones
// that failed are left out for Quarantine and their notices counted
// (dropped, reason "comet_failed"). Notices keep no history: a viewer whose
// comet died with its notice does not get it after reconnecting.

// Lane names: they hold ':', so no room is named like them.
const (
	laneAll       = "notices:all"
	laneUserPrefx = "notices:user:"
)

// acceptNotice queues a consumed notice in its lane.
func (s *scheduler) acceptNotice(rec record, now time.Time) {
	name := laneAll
	if !rec.env.All {
		name = laneUserPrefx + strconv.Itoa(rec.part)
	}
	r := s.room(name)
	r.lane = true
	if len(r.queue) >= s.cfg.MaxPending && r.failures == 0 {
		s.m.dropped.WithLabelValues("overflow").Inc()
		s.offsets.finished(rec.part, rec.off)
		return
	}
	r.queue = append(r.queue, pending{notice: rec.env.Notice, user: rec.env.User, part: rec.part, off: rec.off, gen: rec.gen})
	s.buffered++
	if !r.inflight {
		s.schedule(r, s.dueAt(r, now))
	}
}

// noticePlan is where the claimed notices of a delivery go: one body per
// target comet, the number of notices in each, and the notices that have
// no live comet to go to (indexes into the delivery).
type noticePlan struct {
	targets []route.CometInfo
	bodies  [][]byte
	counts  []int
	noRoute []int
}

// deliverNotices delivers a lane's batch of notices.
func (d *deliverer) deliverNotices(ctx context.Context, req *delivery) outcome {
	v := make([]verdict, len(req.msgs))
	claims, idx, repeats := distinctNotices(req.msgs)
	markAll(v, repeats, finished)
	d.m.notices.WithLabelValues(noticeOp(req), "duplicate").Add(float64(len(repeats)))
	bctx, cancel := context.WithTimeout(ctx, d.cfg.RedisTimeout)
	b, err := d.store.BeginNotices(bctx, claims, route.NoticeOptions{Owner: d.owner, ClaimTTL: d.cfg.ClaimTTL})
	cancel()
	if err != nil {
		d.log.Debug("notices postponed: redis", zap.String("lane", req.room), zap.Error(err))
		d.m.retries.WithLabelValues("redis").Inc()
		return req.result(v, 0, true)
	}
	var claimed []int
	var wait time.Duration
	for k, st := range b.States {
		switch st {
		case route.Claimed:
			claimed = append(claimed, idx[k])
		case route.Processed:
			d.m.notices.WithLabelValues(noticeOp(req), "duplicate").Inc()
			v[idx[k]] = finished
		case route.Busy:
			wait = d.cfg.RetryMin
		}
	}
	if wait > 0 {
		d.m.retries.WithLabelValues("busy_claim").Inc()
	}
	if len(claimed) == 0 {
		return req.result(v, wait, false)
	}
	plan, err := d.planNotices(ctx, req, claimed, b.Comets)
	if err != nil {
		d.log.Error("encode notices", zap.String("lane", req.room), zap.Error(err))
		return req.result(v, d.cfg.RetryMax, true)
	}
	errs := d.pushAll(ctx, nil, plan.targets, func(i int) []byte { return plan.bodies[i] })
	if !d.settle(plan.targets, errs, func(i int) int { return plan.counts[i] }, req.giveUp) {
		d.m.retries.WithLabelValues("push").Inc()
		return req.result(v, wait, true) // the claims stay until the retry refreshes them
	}
	d.endNotices(ctx, req, claimed)
	d.m.notices.WithLabelValues(noticeOp(req), "no_route").Add(float64(len(plan.noRoute)))
	d.m.notices.WithLabelValues(noticeOp(req), "delivered").Add(float64(len(claimed) - len(plan.noRoute)))
	d.m.dropped.WithLabelValues("no_route").Add(float64(len(plan.noRoute)))
	nowMs := time.Now().UnixMilli()
	for _, i := range claimed {
		d.m.e2eLag.Observe(float64(nowMs-req.msgs[i].notice.TS) / 1000)
	}
	markAll(v, claimed, finished)
	return req.result(v, wait, false)
}

// endNotices marks the claimed notices done: delivered, or without a
// route (a redelivery would find none either, or reach a tab opened
// since, which the notice was not meant for).
func (d *deliverer) endNotices(ctx context.Context, req *delivery, claimed []int) {
	done := make([]route.NoticeClaim, len(claimed))
	for k, i := range claimed {
		done[k] = route.NoticeClaim{User: req.msgs[i].user, ID: req.msgs[i].notice.ID}
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.RedisTimeout)
	defer cancel()
	if err := d.store.EndNotices(ectx, done, d.cfg.ProcessedTTL); err != nil {
		// Delivered but not marked: a redelivery after the claims expire
		// pushes them again, and comets and clients drop the repeats.
		d.log.Debug("end notices", zap.String("lane", req.room), zap.Error(err))
	}
}

// planNotices builds the pushes of the claimed notices (indexes into
// req.msgs): broadcasts to every live comet in one body; user notices, per
// comet, grouped by user in the order they came, to the live comets that
// hold the user's connections (comets: user -> cometID -> connections).
func (d *deliverer) planNotices(ctx context.Context, req *delivery, claimed []int, comets map[string]map[string]int64) (noticePlan, error) {
	var p noticePlan
	if req.msgs[0].user == "" {
		p.targets = d.comets.all(ctx)
		if len(p.targets) == 0 {
			p.noRoute = claimed
			return p, nil
		}
		msgs := make([]danmaku.Notice, len(claimed))
		for k, i := range claimed {
			msgs[k] = *req.msgs[i].notice
		}
		body, err := json.Marshal(danmaku.NoticePush{Op: danmaku.OpAll, Msgs: msgs})
		p.bodies = make([][]byte, len(p.targets))
		p.counts = make([]int, len(p.targets))
		for t := range p.targets {
			p.bodies[t], p.counts[t] = body, len(msgs)
		}
		return p, err
	}
	byComet := map[string]*danmaku.NoticePush{}
	for _, i := range claimed {
		pn := req.msgs[i]
		targets, noLease, quarantined := d.comets.targets(ctx, comets[pn.user])
		d.m.undelivered.WithLabelValues(undeliveredNoLease).Add(float64(noLease))
		d.m.undelivered.WithLabelValues(undeliveredQuarantined).Add(float64(quarantined))
		if len(targets) == 0 {
			p.noRoute = append(p.noRoute, i)
			continue
		}
		for _, c := range targets {
			push := byComet[c.ID]
			if push == nil {
				push = &danmaku.NoticePush{Op: danmaku.OpUser}
				byComet[c.ID] = push
				p.targets = append(p.targets, c)
			}
			if n := len(push.Users); n > 0 && push.Users[n-1].User == pn.user {
				push.Users[n-1].Msgs = append(push.Users[n-1].Msgs, *pn.notice)
			} else {
				push.Users = append(push.Users, danmaku.UserNotices{User: pn.user, Msgs: []danmaku.Notice{*pn.notice}})
			}
		}
	}
	p.bodies = make([][]byte, len(p.targets))
	p.counts = make([]int, len(p.targets))
	for t, c := range p.targets {
		push := byComet[c.ID]
		body, err := json.Marshal(push)
		if err != nil {
			return p, err
		}
		p.bodies[t] = body
		for _, un := range push.Users {
			p.counts[t] += len(un.Msgs)
		}
	}
	return p, nil
}

// distinctNotices returns the claims of the notices of ps without repeated
// ids, the index in ps of each, and the indexes of the repeats.
func distinctNotices(ps []pending) (claims []route.NoticeClaim, idx, repeats []int) {
	claims = make([]route.NoticeClaim, 0, len(ps))
	idx = make([]int, 0, len(ps))
	seen := make(map[route.NoticeClaim]struct{}, len(ps))
	for i, p := range ps {
		c := route.NoticeClaim{User: p.user, ID: p.notice.ID}
		if _, dup := seen[c]; dup {
			repeats = append(repeats, i)
			continue
		}
		seen[c] = struct{}{}
		claims = append(claims, c)
		idx = append(idx, i)
	}
	return claims, idx, repeats
}

// noticeOp is the metric label of a lane's delivery: user or all.
func noticeOp(req *delivery) string {
	if req.msgs[0].user == "" {
		return danmaku.OpAll
	}
	return danmaku.OpUser
}

// all returns every comet with a current lease that is not left out. The
// list of leases is reread first (at most once per refreshGap), so a
// broadcast reaches a comet that started since the last refresh.
func (d *cometDirectory) all(ctx context.Context) []route.CometInfo {
	d.refreshSoon(ctx)
	return d.known()
}

// known returns every comet with a lease as of the last reread that is
// not left out, without rereading.
func (d *cometDirectory) known() []route.CometInfo {
	live := *d.live.Load()
	out := make([]route.CometInfo, 0, len(live))
	for id, c := range live {
		if !d.isQuarantined(id) {
			out = append(out, c)
		}
	}
	return out
}
