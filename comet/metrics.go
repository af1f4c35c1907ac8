package comet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	deliveries     prometheus.Counter
	duplicateMsgs  prometheus.Counter
	registryErrors prometheus.Counter
	leaseErrors    prometheus.Counter
}

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

func newMetrics(reg prometheus.Registerer, h *hub) *metrics {
	m := &metrics{
		framesWritten:  counter("frames_written_total", "Frames written to viewers (messages, welcome, errors, pongs)."),
		bytesWritten:   counter("bytes_written_total", "Payload bytes of the frames written to viewers (before compression)."),
		writeErrors:    counter("write_errors_total", "Writes to viewers that failed; the viewer is disconnected."),
		slowConsumers:  counter("slow_consumer_disconnects_total", "Viewers disconnected because their send queue was full."),
		accepted:       counter("connections_accepted_total", "WebSocket connections accepted."),
		rejectedConns:  counterVec("connections_rejected_total", "Connections refused or closed for a policy reason.", "reason"),
		badFrames:      counterVec("bad_frames_total", "Client frames answered with an error frame, by code.", "code"),
		pushBatches:    counterVec("push_batches_total", "Batches received on the internal push endpoint, by result.", "result"),
		deliveries:     counter("deliveries_total", "Batch frames handed to viewer queues."),
		duplicateMsgs:  counter("duplicate_messages_total", "Pushed messages dropped because this comet already sent them to the room."),
		registryErrors: counter("registry_errors_total", "Failed registry (Redis) calls for viewers."),
		leaseErrors:    counter("lease_errors_total", "Failed lease renewals."),
		pushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "push_duration_seconds",
			Help:    "Time from receiving a push to having handed it to every local viewer.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
	}
	conns := prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("connections", "Open viewer connections.")), func() float64 {
		_, n := h.counts()
		return float64(n)
	})
	rooms := prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("rooms", "Rooms with at least one local viewer.")), func() float64 {
		n, _ := h.counts()
		return float64(n)
	})
	reg.MustRegister(m.framesWritten, m.bytesWritten, m.writeErrors, m.slowConsumers, m.accepted,
		m.rejectedConns, m.badFrames, m.pushBatches, m.pushLatency, m.deliveries, m.duplicateMsgs,
		m.registryErrors, m.leaseErrors, conns, rooms)
	return m
}

func (m *metrics) wrote(size int) {
	m.framesWritten.Inc()
	m.bytesWritten.Add(float64(size))
}

func (m *metrics) writeError()            { m.writeErrors.Inc() }
func (m *metrics) slowConsumer()          { m.slowConsumers.Inc() }
func (m *metrics) accept()                { m.accepted.Inc() }
func (m *metrics) rejected(reason string) { m.rejectedConns.WithLabelValues(reason).Inc() }
func (m *metrics) badFrame(code string)   { m.badFrames.WithLabelValues(code).Inc() }
func (m *metrics) registryError()         { m.registryErrors.Inc() }
func (m *metrics) leaseError()            { m.leaseErrors.Inc() }

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
