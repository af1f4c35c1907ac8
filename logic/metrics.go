package logic

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/telemetry"
)

// metrics are the logic role's Prometheus series, all named
// danmaku_logic_*; labels take values from fixed sets (handler names,
// status codes, produce results).
type metrics struct {
	requests       *prometheus.CounterVec
	inFlight       prometheus.Gauge
	accepted       prometheus.Counter
	highAccepted   prometheus.Counter
	rateLimited    prometheus.Counter
	refused        *prometheus.CounterVec
	review         *prometheus.CounterVec // review.go
	historyLimited prometheus.Counter
	historyCut     prometheus.Counter
	admin          *prometheus.CounterVec
	notices        *prometheus.CounterVec
	produce        *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "http_requests_total",
			Help: "HTTP requests by handler and status code.",
		}, []string{"handler", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "http_requests_in_flight",
			Help: "Requests being handled now; a steady rise means Redis or Kafka is slow.",
		}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "messages_accepted_total",
			Help: "Messages acknowledged by Kafka and answered with 202.",
		}),
		highAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "high_priority_accepted_total",
			Help: "High-priority messages acknowledged by Kafka and answered with 202 (also in messages_accepted_total).",
		}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "rate_limited_total",
			Help: "Send requests refused by the per-user, the per-address or the room's high-priority rate limit.",
		}),
		historyLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "history_rate_limited_total",
			Help: "GET /logic/history requests refused (429) by the per-address limit (logic.history_rate_limit).",
		}),
		historyCut: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "history_cut_total",
			Help: "GET /logic/history answers cut by logic.history_max_bytes (answered with more: true).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "send_refused_total",
			Help: "Send requests refused by a limit or moderation: user (per-user bucket), ip (per-address bucket), banned, muted, blocked (blocked word), token (bad or missing token), forbidden (room or user not in the token), priority (high priority without the right), high_rate (the room's high-priority rate limit), members_only, slow_mode, duplicate (the room modes).",
		}, []string{"reason"}),
		admin: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "admin_actions_total",
			Help: "Admin API requests by action (mute, unmute, ban, unban, delete, words_reload, stream_start, stream_end, send) and result (ok, error, unauthenticated, disabled).",
		}, []string{"action", "result"}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "notices_accepted_total",
			Help: "Notices acknowledged by Kafka and answered with 202, by route (push_user, broadcast).",
		}, []string{"route"}),
		produce: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "danmaku", Subsystem: "logic", Name: "kafka_produce_seconds",
			Help:    "Time from handing a request's messages to the producer until Kafka acknowledged them (or the attempt failed).",
			Buckets: []float64{.0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1, 2, 4},
		}, []string{"result"}),
	}
	reg.MustRegister(m.requests, m.inFlight, m.accepted, m.highAccepted, m.rateLimited, m.refused, m.historyLimited, m.historyCut, m.admin, m.notices, m.produce)
	// Every series a dashboard or alert reads exists from the start.
	telemetry.Precreate(m.requests.MetricVec, []string{"send"}, []string{"202", "400", "401", "403", "429", "503"})
	telemetry.Precreate(m.requests.MetricVec, []string{"online", "history", "room", "push_user", "broadcast", "admin"}, []string{"200"})
	telemetry.Precreate(m.refused.MetricVec, []string{"user", "ip", "banned", "muted", "blocked", "token", "forbidden", "priority", "high_rate", "members_only", "slow_mode", "duplicate"})
	telemetry.Precreate(m.admin.MetricVec, []string{"mute", "unmute", "ban", "unban", "delete", "words_reload", "stream_start", "stream_end", "send", "room", "hide", "unhide", "pin", "unpin", "audit"},
		[]string{"ok", "error", "unauthenticated", "disabled"})
	telemetry.Precreate(m.notices.MetricVec, []string{"push_user", "broadcast"})
	telemetry.Precreate(m.produce.MetricVec, []string{"ok", "error"})
	m.review = newReviewCounter(reg)
	return m
}

func (m *metrics) observeRequest(handler string, code int) {
	m.requests.WithLabelValues(handler, strconv.Itoa(code)).Inc()
}

func (m *metrics) observeProduce(d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.produce.WithLabelValues(result).Observe(d.Seconds())
}

func (m *metrics) observeAccepted(n int, p danmaku.Priority) {
	m.accepted.Add(float64(n))
	if p.High() {
		m.highAccepted.Add(float64(n))
	}
}

func (m *metrics) observeNotices(route string, n int) {
	m.notices.WithLabelValues(route).Add(float64(n))
}

// observeRefused counts a refused send; the per-user and per-address
// limits also count in rate_limited_total.
func (m *metrics) observeRefused(reason string) {
	if reason == "user" || reason == "ip" || reason == "high_rate" {
		m.rateLimited.Inc()
	}
	m.refused.WithLabelValues(reason).Inc()
}

// Refused and Produced are what the send path counts (sendpath.Metrics).
func (m *metrics) Refused(reason string)               { m.observeRefused(reason) }
func (m *metrics) Produced(d time.Duration, err error) { m.observeProduce(d, err) }

func (m *metrics) observeAdmin(action, result string) { m.admin.WithLabelValues(action, result).Inc() }
