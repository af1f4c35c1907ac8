package job

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/route"
)

// Canaries (danmaku.Canary, written by logic to every partition) take the
// path of a broadcast notice: the scheduler queues them in one lane, which
// holds the newest canary of each partition (a newer one of a partition
// finishes the one it replaces, unsent); a delivery claims their ids in
// Redis in one round trip (route.BeginNotices), pushes them in one body to
// every comet with a lease that is not left out, and marks them done
// (route.EndNotices). A canary is never retried: the next one, a moment
// later, supersedes it. So the canaries cost the job one delivery, two
// Redis round trips and one push per comet per logic.canary_interval,
// whatever the number of partitions or viewers.
//
// What a pushed canary proves is that, at its time, its partition was
// consumed, Redis answered the guard and the push reached the comets: the
// job records per partition when the newest canary it pushed was written
// (danmaku_job_canary_age_seconds), the comets when the newest they
// received was (comet/canary.go). The ages are exported for the
// partitions this member holds, once it has pushed a canary at all (a
// deployment with canaries off exports none); a held partition without a
// canary since counts from that first one.

// laneCanaries names the lane of canaries; it holds ':', so no room is
// named like it.
const laneCanaries = "canaries:all"

// The results of danmaku_job_canaries_total.
var canaryResults = []string{"pushed", "no_comet", "push_failed", "redis", "duplicate", "superseded"}

// acceptCanary queues a consumed canary in the lane, in place of a canary
// of its partition still waiting there.
func (s *scheduler) acceptCanary(rec record, now time.Time) {
	r := s.room(laneCanaries)
	r.lane = true
	p := pending{canary: rec.env.Canary, part: rec.part, off: rec.off, gen: rec.gen}
	replaced := false
	for i, old := range r.queue {
		if old.part == rec.part {
			s.offsets.finished(old.part, old.off)
			s.m.canaries.WithLabelValues("superseded").Inc()
			r.queue[i], replaced = p, true
			break
		}
	}
	if !replaced {
		r.queue = append(r.queue, p)
		s.buffered++
	}
	if !r.inflight {
		s.schedule(r, s.dueAt(r, now))
	}
}

// deliverCanaries delivers the lane's canaries: one claim of them all, one
// push to every live comet. Whatever happens they are finished.
func (d *deliverer) deliverCanaries(ctx context.Context, req *delivery) outcome {
	v := make([]verdict, len(req.msgs))
	markAll(v, allIndexes(len(req.msgs)), finished)
	claims := make([]route.NoticeClaim, len(req.msgs))
	for i, p := range req.msgs {
		claims[i] = route.NoticeClaim{ID: p.canary.ID}
	}
	bctx, cancel := context.WithTimeout(ctx, d.cfg.RedisTimeout)
	b, err := d.store.BeginNotices(bctx, claims, route.NoticeOptions{Owner: d.owner, ClaimTTL: d.cfg.ClaimTTL})
	cancel()
	if err != nil {
		d.log.Debug("canaries: redis", zap.Error(err))
		d.m.canaries.WithLabelValues("redis").Add(float64(len(claims)))
		return req.result(v, 0, false)
	}
	push := danmaku.CanaryPush{Op: danmaku.OpCanary}
	for i, st := range b.States {
		if st == route.Claimed {
			push.Canaries = append(push.Canaries, *req.msgs[i].canary)
		}
	}
	n := float64(len(push.Canaries))
	d.m.canaries.WithLabelValues("duplicate").Add(float64(len(claims)) - n)
	if n == 0 {
		return req.result(v, 0, false)
	}
	// The comets as of the last periodic reread (job.comet_refresh): a
	// reread here would add its round trips to every canary's age.
	targets := d.comets.known()
	body, _ := json.Marshal(push)
	took := 0
	for _, err := range d.pushAll(ctx, nil, targets, func(int) []byte { return body }) {
		if err == nil {
			took++
		}
	}
	switch {
	case len(targets) == 0:
		d.m.canaries.WithLabelValues("no_comet").Add(n)
	case took < len(targets):
		d.m.canaries.WithLabelValues("push_failed").Add(n)
	default:
		d.m.canaries.WithLabelValues("pushed").Add(n)
	}
	if took > 0 {
		d.canary.pushed(push.Canaries)
	}
	done := make([]route.NoticeClaim, len(push.Canaries))
	for i, c := range push.Canaries {
		done[i] = route.NoticeClaim{ID: c.ID}
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.RedisTimeout)
	defer cancel()
	if err := d.store.EndNotices(ectx, done, d.cfg.ProcessedTTL); err != nil {
		d.log.Debug("canaries: end", zap.Error(err))
	}
	return req.result(v, 0, false)
}

func allIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// canaryAges is the job's record of the newest canary it pushed per
// partition, exported as danmaku_job_canary_age_seconds for the partitions
// it holds.
type canaryAges struct {
	desc     *prometheus.Desc
	assigned func() []int // the partitions this member holds now

	mu      sync.Mutex
	armedAt time.Time         // the first canary pushed; zero: none yet
	newest  map[int]time.Time // partition -> write time of its newest pushed canary
}

func newCanaryAges(reg prometheus.Registerer, assigned func() []int) *canaryAges {
	a := &canaryAges{assigned: assigned, newest: map[int]time.Time{},
		desc: prometheus.NewDesc("danmaku_job_canary_age_seconds",
			"Seconds since logic wrote the newest canary this job pushed to a comet, per partition it holds (from its first canary on; none while canaries are off).",
			[]string{"partition"}, nil)}
	reg.MustRegister(a)
	return a
}

// pushed records that cs reached at least one comet.
func (a *canaryAges) pushed(cs []danmaku.Canary) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.armedAt.IsZero() {
		a.armedAt = time.Now()
	}
	for _, c := range cs {
		if at := time.UnixMilli(c.TS); at.After(a.newest[c.Partition]) {
			a.newest[c.Partition] = at
		}
	}
}

// Describe is prometheus.Collector's.
func (a *canaryAges) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

// Collect is prometheus.Collector's.
func (a *canaryAges) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.armedAt.IsZero() {
		return
	}
	now := time.Now()
	for _, p := range a.assigned() {
		last := a.newest[p]
		if last.Before(a.armedAt) {
			last = a.armedAt
		}
		ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, now.Sub(last).Seconds(), strconv.Itoa(p))
	}
}

// newCanaryCounter is danmaku_job_canaries_total.
func newCanaryCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_job_canaries_total",
		Help: "Canaries consumed, by what became of them: pushed (to every live comet), push_failed (some comet did not take it), no_comet, redis (the claim failed), duplicate (claimed before), superseded (a newer one of its partition came first)."},
		[]string{"result"})
	reg.MustRegister(c)
	telemetry.Precreate(c.MetricVec, canaryResults)
	return c
}
