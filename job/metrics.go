package job

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/telemetry"
)

// metrics are the job's Prometheus series, all named danmaku_job_*. Labels
// take a few fixed values each (a reason or a result), never an id.
type metrics struct {
	consumed    prometheus.Counter
	invalid     prometheus.Counter
	duplicates  prometheus.Counter
	coalesced   prometheus.Counter
	deferred    prometheus.Counter
	dropped     *prometheus.CounterVec
	lockBusy    prometheus.Counter
	broadcasts  prometheus.Counter
	batchSize   prometheus.Histogram
	pushSeconds *prometheus.HistogramVec
	pushErrors  *prometheus.CounterVec
	// The push series by label value, resolved once.
	pushOK, pushFailed            prometheus.Observer
	pushUnavailable, pushRejected prometheus.Counter
	e2eLag, highLag               prometheus.Histogram
	consumerLag                   prometheus.GaugeFunc
	pending                       prometheus.Gauge
	retries                       *prometheus.CounterVec
	commitErrors                  prometheus.Counter
	proofs                        prometheus.Counter
	fetches                       prometheus.Counter
	undelivered                   *prometheus.CounterVec
	staleLocks                    prometheus.Counter
	events                        *prometheus.CounterVec
	notices                       *prometheus.CounterVec
	highConsumed, highEarly       prometheus.Counter
	held                          prometheus.Counter
	canaries                      *prometheus.CounterVec // canary.go
}

// The reasons of danmaku_job_undelivered_total.
const (
	undeliveredNoComets    = "no_comets"    // no comet holds a viewer of the room
	undeliveredNoLease     = "no_lease"     // the room's comet has no current lease
	undeliveredQuarantined = "quarantined"  // the comet failed recently and is left out
	undeliveredUnavailable = "unavailable"  // push failed: network, timeout, 5xx
	undeliveredRejected    = "rejected"     // push answered 4xx other than 401
	undeliveredUnauth      = "unauthorized" // push answered 401: push secrets differ
)

func newMetrics(reg prometheus.Registerer, lag func() float64) *metrics {
	m := &metrics{
		consumed: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_consumed_total",
			Help: "Kafka records consumed."}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_invalid_total",
			Help: "Records that could not be decoded and were skipped."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_duplicates_total",
			Help: "Messages skipped because their msgId was already delivered."}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_coalesced_total",
			Help: "Messages that waited for their room's window and went out in a trailing batch."}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_deferred_total",
			Help: "Messages that did not fit their window's batch (job.budget) and waited for the next window; counted once per window waited."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_job_dropped_total",
			Help: "Messages and notices deliberately not delivered, by reason (cooldown: drop policy; overflow; comet_failed; no_route: a notice to a user without a connection; deleted: a held message deleted before its release)."}, []string{"reason"}),
		lockBusy: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_lock_contention_total",
			Help: "Deliveries postponed because the room's broadcast lock was held elsewhere."}),
		broadcasts: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_broadcasts_total",
			Help: "Room batches delivered."}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "danmaku_job_batch_messages",
			Help: "Messages per delivered room batch.", Buckets: prometheus.ExponentialBuckets(1, 4, 7)}),
		pushSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "danmaku_job_push_seconds",
			Help: "Latency of one push to one comet, by result (ok, error).", Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12)}, []string{"result"}),
		pushErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_job_push_errors_total",
			Help: "Failed pushes to a comet, by reason (unavailable: network, timeout or 5xx, tried again; rejected: a 4xx answer)."}, []string{"reason"}),
		e2eLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "danmaku_job_end_to_end_lag_seconds",
			Help: "Time from logic accepting a message to its push to the comets.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "danmaku_job_pending_messages",
			Help: "Messages consumed and not yet delivered."}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_job_retries_total",
			Help: "Room deliveries retried later, by reason (redis, push, busy_claim, membership: no proof that the job still belongs to its consumer group generation)."}, []string{"reason"}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_commit_errors_total",
			Help: "Failed offset commits (retried at the next interval)."}),
		proofs: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_membership_proofs_total",
			Help: "Commits sent before a delivery to prove the job still belongs to its consumer group generation (after job.processed_ttl * 3/4 without an accepted commit)."}),
		fetches: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_fetches_total",
			Help: "Fetch requests answered by the Kafka brokers (each carries any number of records of the job's partitions)."}),
		undelivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_job_undelivered_total",
			Help: "Messages of finished batches not handed to a comet, once per message and comet, by reason (no_comets: nobody watches the room; " +
				"no_lease; quarantined; unavailable; rejected; unauthorized: the comet refused job.push_secret)."}, []string{"reason"}),
		staleLocks: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_stale_locks_released_total",
			Help: "Room locks taken by broadcast attempts that ran in Redis after they had failed (a stall), released once Redis answered."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_job_events_total",
			Help: "Moderation events finished, by op (del, ban, state, shadow, pin, unpin) and result (delivered, duplicate)."}, []string{"op", "result"}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_job_notices_total",
			Help: "Notices finished, by op (user, all) and result (delivered, no_route: the user had no connection, duplicate)."}, []string{"op", "result"}),
	}
	m.highLane()
	m.consumerLag = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "danmaku_job_consumer_lag",
		Help: "Records behind the end of the assigned partitions, as the last fetch of each reported it."}, lag)
	m.precreate()
	m.pushOK, m.pushFailed = m.pushSeconds.WithLabelValues("ok"), m.pushSeconds.WithLabelValues("error")
	m.pushUnavailable, m.pushRejected = m.pushErrors.WithLabelValues("unavailable"), m.pushErrors.WithLabelValues("rejected")
	reg.MustRegister(m.consumed, m.invalid, m.duplicates, m.coalesced, m.deferred, m.dropped, m.lockBusy, m.broadcasts,
		m.batchSize, m.pushSeconds, m.pushErrors, m.e2eLag, m.consumerLag, m.pending, m.retries, m.commitErrors, m.proofs, m.fetches,
		m.undelivered, m.staleLocks, m.events, m.notices, m.highConsumed, m.highEarly, m.highLag)
	m.held = newHeldCounter(reg)
	m.canaries = newCanaryCounter(reg)
	return m
}

// highLane creates the high-priority lane's series.
func (m *metrics) highLane() {
	m.highConsumed = prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_high_priority_total",
		Help: "High-priority messages consumed; none is dropped by overflow or the drop policy."})
	m.highEarly = prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_job_high_priority_early_total",
		Help: "High-priority messages dispatched while their room's window still ran, with the messages queued before them, instead of at its end."})
	m.highLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "danmaku_job_high_priority_lag_seconds",
		Help: "Time from logic accepting a high-priority message to its push to the comets (also in end_to_end_lag).", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)})
}

// precreate creates every labelled series a dashboard or alert reads, so
// each exists from the start.
func (m *metrics) precreate() {
	for _, c := range []string{"cooldown", "overflow", "comet_failed", "no_route", "deleted"} {
		m.dropped.WithLabelValues(c)
	}
	for _, c := range []string{undeliveredNoComets, undeliveredNoLease, undeliveredQuarantined,
		undeliveredUnavailable, undeliveredRejected, undeliveredUnauth} {
		m.undelivered.WithLabelValues(c)
	}
	telemetry.Precreate(m.retries.MetricVec, []string{"redis", "push", "busy_claim", "membership"})
	telemetry.Precreate(m.events.MetricVec, []string{"del", "ban", "state", "shadow", "pin", "unpin"}, []string{"delivered", "duplicate"})
	telemetry.Precreate(m.notices.MetricVec, []string{"user", "all"}, []string{"delivered", "no_route", "duplicate"})
}

// observePush records one push attempt to a comet that took d.
func (m *metrics) observePush(d time.Duration, err error) {
	switch {
	case err == nil:
		m.pushOK.Observe(d.Seconds())
	case danmaku.ErrorCode(err) == danmaku.EUNAVAILABLE:
		m.pushFailed.Observe(d.Seconds())
		m.pushUnavailable.Inc()
	default:
		m.pushFailed.Observe(d.Seconds())
		m.pushRejected.Inc()
	}
}
