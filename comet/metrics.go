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

func newMetrics(reg prometheus.Registerer, h *hub) *metrics {
	m := &metrics{
		framesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "frames_written_total", Help: "Frames written to viewers (messages, welcome, errors, pongs)."}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "bytes_written_total", Help: "Payload bytes of the frames written to viewers (before compression)."}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "write_errors_total", Help: "Writes to viewers that failed; the viewer is disconnected."}),
		slowConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "slow_consumer_disconnects_total", Help: "Viewers disconnected because their send queue was full."}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "connections_accepted_total", Help: "WebSocket connections accepted."}),
		rejectedConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "connections_rejected_total", Help: "Connections refused or closed for a policy reason."}, []string{"reason"}),
		badFrames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "bad_frames_total", Help: "Client frames answered with an error frame, by code."}, []string{"code"}),
		pushBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "push_batches_total", Help: "Batches received on the internal push endpoint, by result."}, []string{"result"}),
		pushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "push_duration_seconds", Help: "Time from receiving a push to having handed it to every local viewer.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "deliveries_total", Help: "Batch frames handed to viewer queues."}),
		duplicateMsgs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "duplicate_messages_total", Help: "Pushed messages dropped because this comet already sent them to the room."}),
		registryErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "registry_errors_total", Help: "Failed registry (Redis) calls for viewers."}),
		leaseErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "lease_errors_total", Help: "Failed lease renewals."}),
	}
	conns := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "connections", Help: "Open viewer connections."}, func() float64 {
		_, n := h.counts()
		return float64(n)
	})
	rooms := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "rooms", Help: "Rooms with at least one local viewer."}, func() float64 {
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
