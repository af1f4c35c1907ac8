package archive

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku/internal/telemetry"
)

// metrics are the archive's series, danmaku_archive_*.
type metrics struct {
	records      *prometheus.CounterVec
	comments     prometheus.Counter // records{kind="comment"}, counted per comment
	stored       prometheus.Counter
	duplicates   prometheus.Counter
	streams      *prometheus.CounterVec
	writeSeconds prometheus.Histogram
	writeErrors  prometheus.Counter
	fetchErrors  prometheus.Counter
	commitErrors prometheus.Counter
	positions    *prometheus.CounterVec
}

// recordKinds are the label values of danmaku_archive_records_total.
// positionResults are the label values of danmaku_archive_positions_total.
var positionResults = []string{"with_comment", "late", "missing", "unmatched", "dropped"}

var recordKinds = []string{"comment", "event", "notice", "canary", "invalid", "outside_stream", "retry", "not_visible", "stream_id_reused"}

func newMetrics(reg prometheus.Registerer, lag func() float64) *metrics {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_archive_records_total",
			Help: "Records consumed, by kind: comment (placed in a stream), event, notice and canary (ignored), invalid, outside_stream (no live stream), retry (a client's resend of a stored id), not_visible, stream_id_reused."}, []string{"kind"}),
		stored: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_archive_stored_total",
			Help: "Comments written to the database (new rows)."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_archive_duplicates_total",
			Help: "Comments of a redelivered record, found already stored."}),
		streams: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_archive_streams_total",
			Help: "Streams started and ended."}, []string{"op"}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "danmaku_archive_write_seconds",
			Help: "Time of one batch's database write.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_archive_write_errors_total",
			Help: "Batches whose write failed and was retried."}),
		fetchErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_archive_fetch_errors_total",
			Help: "Kafka fetches that failed and were retried."}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "danmaku_archive_commit_errors_total",
			Help: "Offset commits that failed after the write (the batch comes again and is stored once)."}),
		positions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "danmaku_archive_positions_total",
			Help: "Timeline positions, by result: with_comment (written with its comment), late (written to a comment stored before without it), missing (a comment stored without one: none came within archive.position_wait), unmatched (a position whose comment was not stored), dropped (over the most positions held waiting for their comments, 100,000)."}, []string{"result"}),
	}
	telemetry.Precreate(m.records.MetricVec, recordKinds)
	m.comments = m.records.WithLabelValues("comment")
	telemetry.Precreate(m.streams.MetricVec, []string{"start", "end"})
	telemetry.Precreate(m.positions.MetricVec, positionResults)
	if reg != nil {
		reg.MustRegister(m.records, m.stored, m.duplicates, m.streams, m.writeSeconds, m.writeErrors, m.fetchErrors, m.commitErrors, m.positions,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "danmaku_archive_lag_messages",
				Help: "Records of the archive's partitions not yet written, as of the last fetch (0 once it waited idle)."}, lag))
	}
	return m
}
