package job

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
	"go.uber.org/zap"
)

// flush is one delivery of a room batch: the processor fills the request
// part, a worker the outcome.
type flush struct {
	room   string
	batch  []pending
	final  bool // shutdown drain: skip the cooldown window
	giveUp bool // deliver to the comets that take it and count the rest

	finished []int         // batch indexes whose offsets are done
	requeue  []int         // batch indexes to try again, in order
	wait     time.Duration // no retry before this
	failed   bool          // a delivery error (Redis or a comet), for backoff
}

func (j *Job) worker() {
	defer j.wg.Done()
	for f := range j.work {
		j.deliver(f)
		j.results <- f
	}
}

func (f *flush) requeueAll(wait time.Duration) {
	f.requeue = f.requeue[:0]
	for i := range f.batch {
		f.requeue = append(f.requeue, i)
	}
	f.wait = wait
}

// deliver runs the guards and the pushes of one batch in two Redis round
// trips around the pushes: BeginBroadcast (lock free? window, claims, lock,
// routes) -> push to each comet -> EndBroadcast (mark processed, unlock).
func (j *Job) deliver(f *flush) {
	ctx := j.workCtx
	m := j.m
	if ctx.Err() != nil {
		f.requeueAll(0)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()

	// A message id repeated inside one batch (a client retry that reached
	// Kafka twice in quick succession) is a duplicate before Redis is asked.
	ids := make([]string, 0, len(f.batch))
	idx := make([]int, 0, len(f.batch))
	seen := make(map[string]struct{}, len(f.batch))
	for i, p := range f.batch {
		if _, dup := seen[p.msg.ID]; dup {
			m.duplicates.Inc()
			f.finished = append(f.finished, i)
			continue
		}
		seen[p.msg.ID] = struct{}{}
		ids = append(ids, p.msg.ID)
		idx = append(idx, i)
	}
	// The Redis window is a little shorter than the local one: the key is
	// set a round trip after the processor started its window, and would
	// otherwise still run for those milliseconds when the next batch is due.
	window := j.cfg.Window - min(j.cfg.Window/20, 10*time.Millisecond)
	if f.final {
		window = 0 // shutdown drain: deliver now
	}
	b, err := j.store.BeginBroadcast(rctx, f.room, ids, route.BeginOptions{
		Window: window, Owner: j.owner, ClaimTTL: j.cfg.ClaimTTL, LockTTL: j.cfg.LockTTL})
	if err != nil {
		j.redisFailed(f, err)
		return
	}
	switch {
	case b.Wait > 0:
		// Another consumer broadcast this room within the window (after a
		// rebalance): wait for the window's end, or skip as the drop policy
		// says.
		if j.cfg.Policy == PolicyDrop {
			m.dropped.WithLabelValues("cooldown").Add(float64(len(idx)))
			f.finished = append(f.finished, idx...)
			return
		}
		f.requeue, f.wait = idx, b.Wait
		return
	case b.Locked:
		m.lockBusy.Inc()
		f.requeue, f.wait = idx, j.cfg.LockRetry
		return
	}
	var claimed []int
	for k, st := range b.States {
		i := idx[k]
		switch st {
		case route.Claimed:
			claimed = append(claimed, i)
		case route.Processed:
			m.duplicates.Inc()
			f.finished = append(f.finished, i)
		case route.Busy:
			f.requeue = append(f.requeue, i)
		}
	}
	if len(f.requeue) > 0 {
		m.retries.WithLabelValues("busy_claim").Inc()
		f.wait = j.cfg.RetryMin
	}
	if b.Lock == nil {
		return
	}
	locked := time.Now()
	msgs := make([]danmaku.Message, len(claimed))
	for k, i := range claimed {
		msgs[k] = f.batch[i].msg
	}
	ok := j.broadcast(ctx, b.Lock, f.room, msgs, b.Comets, f.giveUp)
	unlocked := time.Now()
	ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer ecancel()
	if !ok {
		// Our claims stay; the retry refreshes them. Comets drop the msgIds
		// they already showed, so a retry to every comet is safe.
		if err := j.store.ReleaseLock(ectx, b.Lock); err != nil && !errors.Is(err, route.ErrNotHolder) {
			j.log.Debug("release lock", zap.String("room", f.room), zap.Error(err))
		}
		f.requeue = append(f.requeue, claimed...)
		sort.Ints(f.requeue)
		f.failed = true // the processor sets the backoff
		m.retries.WithLabelValues("push").Inc()
		return
	}
	if err := j.store.EndBroadcast(ectx, b.Lock, idsOf(f.batch, claimed), j.cfg.ProcessedTTL); err != nil && !errors.Is(err, route.ErrNotHolder) {
		// Delivered but not marked: a redelivery after the claim expires may
		// push these again, and comets and clients drop repeated msgIds.
		j.log.Debug("end broadcast", zap.String("room", f.room), zap.Error(err))
	}
	f.finished = append(f.finished, claimed...)
	m.broadcasts.Inc()
	m.batchSize.Observe(float64(len(msgs)))
	nowMs := time.Now().UnixMilli()
	for _, msg := range msgs {
		m.e2eLag.Observe(float64(nowMs-msg.TS) / 1000)
	}
	if j.hook != nil {
		j.hook(f.room, locked, unlocked, msgs)
	}
}

func (j *Job) redisFailed(f *flush, err error) {
	j.log.Debug("delivery postponed: redis", zap.String("room", f.room), zap.Error(err))
	j.m.retries.WithLabelValues("redis").Inc()
	f.finished = f.finished[:0]
	f.requeueAll(0)
	f.failed = true // the processor sets the backoff
}

func idsOf(batch []pending, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = batch[i].msg.ID
	}
	return out
}

// broadcast pushes msgs to every live comet of counts (the room's comets), in
// parallel, renewing the lock while pushes run. It reports whether every
// comet that is still alive took the batch (or giveUp is set).
func (j *Job) broadcast(ctx context.Context, lock *route.Lock, room string, msgs []danmaku.Message, counts map[string]int64, giveUp bool) bool {
	live := *j.comets.Load()
	var targets []route.CometInfo
	for id := range counts {
		if c, ok := live[id]; ok && !j.quarantined(id) {
			targets = append(targets, c)
		}
	}
	if len(targets) == 0 {
		return true // nobody watching: delivered to all zero viewers
	}
	body, err := json.Marshal(danmaku.NewBatch(room, msgs))
	if err != nil {
		return false
	}
	errs := make([]error, len(targets))
	if len(targets) == 1 {
		errs[0] = j.pushOne(ctx, targets[0], body)
	} else {
		done := make(chan struct{})
		var wg sync.WaitGroup
		for i, c := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = j.pushOne(ctx, c, body)
			}()
		}
		go func() { wg.Wait(); close(done) }()
		j.waitRenewing(ctx, lock, done)
	}
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, targets[i].ID)
		}
	}
	switch {
	case len(failed) == 0:
		return true
	case len(failed) == len(targets) && !giveUp:
		// Nothing went out: most likely our side of the network. Retry the
		// whole batch later.
		return false
	}
	// Some comets took the batch. A comet that failed every attempt is left
	// out for a while so it cannot slow the room down again; its share of
	// the batch is counted as dropped. If it is really gone its lease ends
	// and the janitor removes its routes; its viewers reconnect elsewhere.
	for _, id := range failed {
		j.quarantine(id)
	}
	j.m.dropped.WithLabelValues("comet_failed").Add(float64(len(msgs) * len(failed)))
	j.log.Warn("comet failed; left out for a while", zap.Strings("comets", failed), zap.Duration("for", j.cfg.Quarantine))
	return true
}

// waitRenewing waits for done, renewing the broadcast lock every third of
// its TTL so a push that takes long does not lose it.
func (j *Job) waitRenewing(ctx context.Context, lock *route.Lock, done <-chan struct{}) {
	renew := time.NewTicker(j.cfg.LockTTL / 3)
	defer renew.Stop()
	for {
		select {
		case <-done:
			return
		case <-renew.C:
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			if err := j.store.RenewLock(rctx, lock, j.cfg.LockTTL); err != nil {
				j.log.Debug("renew lock", zap.String("room", lock.Room), zap.Error(err))
			}
			cancel()
		}
	}
}

func (j *Job) quarantine(comet string) {
	j.quarantineMu.Lock()
	j.quarantineTill[comet] = time.Now().Add(j.cfg.Quarantine)
	j.quarantineMu.Unlock()
}

func (j *Job) quarantined(comet string) bool {
	j.quarantineMu.Lock()
	defer j.quarantineMu.Unlock()
	until, ok := j.quarantineTill[comet]
	if ok && time.Now().After(until) {
		delete(j.quarantineTill, comet)
		return false
	}
	return ok
}

// pushOne pushes body to one comet, retrying up to PushAttempts times.
func (j *Job) pushOne(ctx context.Context, c route.CometInfo, body []byte) error {
	var err error
	for attempt := 0; attempt < j.cfg.PushAttempts; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, j.cfg.PushTimeout)
		start := time.Now()
		_, err = j.pusher.Push(pctx, c.Addr, body)
		cancel()
		j.m.pushSeconds.WithLabelValues(c.ID).Observe(time.Since(start).Seconds())
		if err == nil {
			return nil
		}
		j.m.pushErrors.WithLabelValues(c.ID).Inc()
		if danmaku.ErrorCode(err) != danmaku.EUNAVAILABLE || ctx.Err() != nil {
			break // a 4xx answer will not change on retry
		}
	}
	j.log.Debug("push failed", zap.String("comet", c.ID), zap.Error(err))
	return err
}
