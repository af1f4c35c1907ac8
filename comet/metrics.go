package comet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/route"
)

// Every comet series is named danmaku_comet_*.
const namespace, subsystem = "danmaku", "comet"

// metrics are the comet's Prometheus metrics, registered on the registerer
// given to New. Connection and room gauges are read from the hub at scrape
// time, so the hot path does not maintain them. Labels take values from
// fixed sets (rejection reasons, frame error codes, push results).
type metrics struct {
	framesWritten  prometheus.Counter
	bytesWritten   prometheus.Counter
	writeErrors    prometheus.Counter
	slowConsumers  prometheus.Counter
	accepted       prometheus.Counter
	rejectedConns  *prometheus.CounterVec
	badFrames      *prometheus.CounterVec
	pushBatches    *prometheus.CounterVec
	pushLatency    prometheus.Histogram
	fanoutLag      *prometheus.HistogramVec
	fanoutNormal   prometheus.Observer
	fanoutHigh     prometheus.Observer
	deliveries     prometheus.Counter
	duplicateMsgs  prometheus.Counter
	registryErrors prometheus.Counter
	leaseErrors    prometheus.Counter
	replays        *prometheus.CounterVec
	resumes        *prometheus.CounterVec
	gapRepairs     *prometheus.CounterVec
	repairedMsgs   *prometheus.CounterVec
	historyReads   *prometheus.CounterVec
	catchUps       prometheus.Counter
	staleMsgs      prometheus.Counter
	repairs        *prometheus.CounterVec
	repairedConns  *prometheus.CounterVec
	events         *prometheus.CounterVec
	deletedMsgs    prometheus.Counter
	notices        *prometheus.CounterVec
	opsLimited     prometheus.Counter
	densityKept    *prometheus.CounterVec
	densitySkipped *prometheus.CounterVec
}

// Reasons a room's history is read and gaps are repaired (label values).
const (
	repairPushGap = "push"  // a push whose first position was beyond the last delivered, or of a new epoch
	repairCheck   = "check" // the gap check found the head beyond the last delivered
	repairJoin    = "join"  // a join found the comet's view out of date
	repairDels    = "dels"  // a push or a read counted deletions this comet missed
)

// opts names a comet series danmaku_comet_<name>.
func opts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts(opts(name, help)))
}

func counterVec(name, help, label string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts(opts(name, help)), []string{label})
}

func gaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts(name, help)), f)
}

// newMetrics registers the comet's series; registry returns the routes the
// comet holds and the number Redis listed at the last lease renewal.
func newMetrics(reg prometheus.Registerer, h *hub, registry func() (held, registered int64)) *metrics {
	m := &metrics{
		framesWritten:  counter("frames_written_total", "Frames written to viewers (messages, welcome, errors, pongs)."),
		bytesWritten:   counter("bytes_written_total", "Payload bytes of the frames written to viewers (before compression)."),
		writeErrors:    counter("write_errors_total", "Writes to viewers that failed; the viewer is disconnected."),
		slowConsumers:  counter("slow_consumer_disconnects_total", "Viewers disconnected (4008) because their send queue overflowed and the ring no longer held what they missed."),
		accepted:       counter("connections_accepted_total", "WebSocket connections accepted."),
		opsLimited:     counter("ops_rate_limited_total", "Room ops (join, sub, unsub) refused with rate_limited: the connection sent more than ops_burst at once or ops_rate a second."),
		rejectedConns:  counterVec("connections_rejected_total", "Connections refused or closed for a policy reason.", "reason"),
		badFrames:      counterVec("bad_frames_total", "Client frames answered with an error frame, by code.", "code"),
		pushBatches:    counterVec("push_batches_total", "Batches received on the internal push endpoint, by result.", "result"),
		deliveries:     counter("deliveries_total", "Batch frames handed to viewer queues."),
		duplicateMsgs:  counter("duplicate_messages_total", "Pushed messages dropped because this comet already sent them to the room (same id, or a position at or below the last delivered)."),
		registryErrors: counter("registry_errors_total", "Failed registry (Redis) calls for viewers."),
		leaseErrors:    counter("lease_errors_total", "Failed lease renewals."),
		replays:        counterVec("replays_total", "Replay frames after a welcome (history on join, resume), by where the comet found them (ring, or redis when the join had to read).", "source"),
		resumes:        counterVec("resumes_total", "Joins with since, by result: recovered, or unrecoverable (another epoch, or older than the kept history).", "result"),
		gapRepairs:     counterVec("gap_repairs_total", "Gaps in a room's timeline filled from Redis before delivery, by trigger (push, check, join, dels).", "trigger"),
		repairedMsgs:   counterVec("repaired_messages_total", "Messages delivered to a room from Redis to fill a gap, by trigger (dels: deleted ids of del events this comet missed).", "trigger"),
		historyReads:   counterVec("history_reads_total", "Reads of room histories from Redis, by reason (push, check, join, backfill, deletions).", "reason"),
		catchUps:       counter("slow_consumer_catchups_total", "Viewers whose send queue overflowed and that were caught up from the ring instead of disconnected."),
		staleMsgs:      counter("stale_messages_total", "Pushed messages dropped because their epoch had ended."),
		repairs: counterVec("registry_repairs_total", "Registry repairs, by kind (reregister: Redis lost the comet's routes and all were written again; "+
			"reconcile: anti-entropy, a count that disagreed at renewal or a registry call that failed, counted whether or not it changed anything; leftover: routes of an earlier process removed at start).", "kind"),
		repairedConns: counterVec("registry_repaired_total", "What registry repairs changed in Redis, by change (added: routes written that Redis lacked; "+
			"removed: routes of connections the comet does not hold; rooms_corrected: per-room counts set right).", "change"),
		events:      counterVec("events_total", "Moderation events pushed by job, by op (del, ban, state, shadow, pin, unpin).", "op"),
		deletedMsgs: counter("deleted_messages_total", "Messages removed from room rings by del events."),
		notices:     counterVec("notices_total", "Notices pushed by job, by op (user: to one user, all: to every viewer); repeats are also counted in duplicate_messages_total.", "op"),
		densityKept: counterVec("density_kept_total", "Normal messages of live batches a tier's frame kept, once per batch and tier with viewers in the room "+
			"(not per viewer), by tier (a cap in messages a second, or all).", "tier"),
		densitySkipped: counterVec("density_skipped_total", "Normal messages of live batches a tier's frame left out, once per batch and tier with viewers in the room "+
			"(not per viewer), by tier; a viewer's own messages still reach it.", "tier"),
		pushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "push_duration_seconds",
			Help:    "Time from receiving a push to having queued it for every local viewer, the viewers' writes running meanwhile.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
		fanoutLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "fanout_lag_seconds",
			Help: "Time from a live msgs frame handed to its room's viewers to its write to a viewer's socket, " +
				"sampled (one viewer in 16), by lane (high: the frame carries a high-priority message).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"lane"}),
	}
	m.precreate()
	reg.MustRegister(m.framesWritten, m.bytesWritten, m.writeErrors, m.slowConsumers, m.accepted,
		m.rejectedConns, m.badFrames, m.pushBatches, m.pushLatency, m.deliveries, m.duplicateMsgs,
		m.registryErrors, m.leaseErrors, m.replays, m.resumes, m.gapRepairs, m.repairedMsgs,
		m.historyReads, m.catchUps, m.staleMsgs, m.repairs, m.repairedConns, m.events, m.deletedMsgs, m.notices,
		m.opsLimited, m.densityKept, m.densitySkipped, m.fanoutLag)
	reg.MustRegister(gauges(h, registry)...)
	h.density.count(m.densityKept, m.densitySkipped)
	return m
}

// precreate makes every series a dashboard or alert reads exist from the
// start.
func (m *metrics) precreate() {
	telemetry.Precreate(m.rejectedConns.MetricVec, []string{"ip_limit", "shutting_down", "origin", "handshake", "bad_uid",
		"token", "frame_too_big", "bad_utf8", "banned", "forbidden_room", "too_many_rooms", "token_expired", "bad_density", "bad_event_id"})
	telemetry.Precreate(m.badFrames.MetricVec, []string{codeBadJSON, codeBadRoom, codeUnknownOp})
	telemetry.Precreate(m.pushBatches.MetricVec, []string{"ok", "shutting_down", "unauthorized", "bad_request"})
	telemetry.Precreate(m.replays.MetricVec, []string{"ring", "redis"})
	telemetry.Precreate(m.resumes.MetricVec, []string{"recovered", "unrecoverable"})
	triggers := []string{repairPushGap, repairCheck, repairJoin, repairDels}
	telemetry.Precreate(m.gapRepairs.MetricVec, triggers)
	telemetry.Precreate(m.repairedMsgs.MetricVec, triggers)
	telemetry.Precreate(m.historyReads.MetricVec, []string{"push", "check", "join", "backfill", "deletions"})
	telemetry.Precreate(m.events.MetricVec, []string{"del", "ban", "state", "shadow", "pin", "unpin"})
	telemetry.Precreate(m.notices.MetricVec, []string{"user", "all"})
	m.fanoutNormal, m.fanoutHigh = m.fanoutLag.WithLabelValues("normal"), m.fanoutLag.WithLabelValues("high")
	for _, k := range []string{regReregister, regReconcile, regLeftover} {
		m.repairs.WithLabelValues(k)
	}
	for _, c := range []string{"added", "removed", "rooms_corrected"} {
		m.repairedConns.WithLabelValues(c)
	}
}

// gauges are the series read at scrape time: connections and rooms from
// the hub, held and registered routes from the registry.
func gauges(h *hub, registry func() (held, registered int64)) []prometheus.Collector {
	conns := gaugeFunc("connections", "Open viewer connections.", func() float64 {
		_, n := h.counts()
		return float64(n)
	})
	rooms := gaugeFunc("rooms", "Rooms with at least one local viewer.", func() float64 {
		n, _ := h.counts()
		return float64(n)
	})
	held := gaugeFunc("registry_held_connections", "Viewer routes the comet holds (joined a room); compare with registry_registered_connections.", func() float64 {
		n, _ := registry()
		return float64(n)
	})
	registered := gaugeFunc("registry_registered_connections", "Routes Redis listed for this comet at the last lease renewal or repair.", func() float64 {
		_, n := registry()
		return float64(n)
	})
	return []prometheus.Collector{conns, rooms, held, registered}
}

func (m *metrics) wrote(size int) {
	m.framesWritten.Inc()
	m.bytesWritten.Add(float64(size))
}

// fanoutSample is one viewer in how many whose writes feed fanout_lag.
const fanoutSample = 16

// wroteLive records the lag of a live frame (stamped at live, UnixNano)
// written to a viewer at now.
func (m *metrics) wroteLive(live int64, high bool, now time.Time) {
	o := m.fanoutNormal
	if high {
		o = m.fanoutHigh
	}
	o.Observe(float64(now.UnixNano()-live) / 1e9)
}

func (m *metrics) writeError()            { m.writeErrors.Inc() }
func (m *metrics) slowConsumer()          { m.slowConsumers.Inc() }
func (m *metrics) accept()                { m.accepted.Inc() }
func (m *metrics) opLimited()             { m.opsLimited.Inc() }
func (m *metrics) rejected(reason string) { m.rejectedConns.WithLabelValues(reason).Inc() }
func (m *metrics) badFrame(code string)   { m.badFrames.WithLabelValues(code).Inc() }
func (m *metrics) registryError()         { m.registryErrors.Inc() }
func (m *metrics) leaseError()            { m.leaseErrors.Inc() }
func (m *metrics) caughtUp()              { m.catchUps.Inc() }
func (m *metrics) stale(n int)            { m.staleMsgs.Add(float64(n)) }
func (m *metrics) deleted(n int)          { m.deletedMsgs.Add(float64(n)) }
func (m *metrics) historyRead(why string) { m.historyReads.WithLabelValues(why).Inc() }

// repaired counts one gap filled with n messages.
func (m *metrics) repaired(trigger string, n int) {
	m.gapRepairs.WithLabelValues(trigger).Inc()
	m.repairedMsgs.WithLabelValues(trigger).Add(float64(n))
}

// joined counts a join's replay and, for a resume, its result.
func (m *metrics) joined(recovered *bool, replayed, read bool) {
	if replayed {
		src := "ring"
		if read {
			src = "redis"
		}
		m.replays.WithLabelValues(src).Inc()
	}
	switch {
	case recovered == nil:
	case *recovered:
		m.resumes.WithLabelValues("recovered").Inc()
	default:
		m.resumes.WithLabelValues("unrecoverable").Inc()
	}
}

// registryRepaired counts one registry repair of kind and what it changed.
func (m *metrics) registryRepaired(kind string, r route.Repair) {
	m.repairs.WithLabelValues(kind).Inc()
	m.repairedConns.WithLabelValues("added").Add(float64(r.Added))
	m.repairedConns.WithLabelValues("removed").Add(float64(r.Removed))
	m.repairedConns.WithLabelValues("rooms_corrected").Add(float64(r.Corrected))
}

// observePush records one push: its result, its latency, the frames handed
// out and the duplicate messages dropped.
func (m *metrics) observePush(result string, d time.Duration, delivered, dups int) {
	m.pushBatches.WithLabelValues(result).Inc()
	if result == "ok" {
		m.pushLatency.Observe(d.Seconds())
	}
	m.deliveries.Add(float64(delivered))
	m.duplicateMsgs.Add(float64(dups))
}
