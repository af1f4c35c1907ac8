package comet

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
)

// canaryWatch records the delivery canaries job pushes (op canary): per
// partition of the room topic, when logic wrote the newest one this comet
// received. A canary is never handed to a viewer; it costs one push per
// partition per logic.canary_interval, whatever the number of viewers.
//
// The comet is armed by its first canary: from then on every partition of
// the topic (the canary says how many there are) has an age, counted from
// the arming for a partition not heard from since, and Ready fails while
// one of them is older than Config.CanaryMaxAge: this comet would not get
// the messages of that partition either. Before its first canary (a
// deployment with canaries off, a comet job does not know yet) it has no
// age and the canary does not affect readiness.
type canaryWatch struct {
	maxAge  time.Duration
	age     *prometheus.Desc
	latency prometheus.Histogram
	count   prometheus.Counter

	mu         sync.Mutex
	armedAt    time.Time         // first canary; zero: none yet
	partitions int               // of the newest canary
	newest     map[int]time.Time // partition -> write time of its newest canary
}

func newCanaryWatch(reg prometheus.Registerer, maxAge time.Duration) *canaryWatch {
	w := &canaryWatch{maxAge: maxAge, newest: map[int]time.Time{},
		age: prometheus.NewDesc(namespace+"_"+subsystem+"_canary_age_seconds",
			"Seconds since logic wrote the newest delivery canary this comet received, per partition of the room topic (from its first canary on).",
			[]string{"partition"}, nil),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: subsystem,
			Name: "canary_latency_seconds",
			Help: "From logic writing a canary to this comet receiving it: the path of a message through Kafka, job's claim and the push."}),
		count: prometheus.NewCounter(prometheus.CounterOpts(opts("canaries_total",
			"Delivery canaries received from job."))),
	}
	reg.MustRegister(w, w.latency, w.count)
	return w
}

// observe records a canary received now.
func (w *canaryWatch) observe(c danmaku.Canary, now time.Time) {
	at := time.UnixMilli(c.TS)
	w.count.Inc()
	w.latency.Observe(max(now.Sub(at), 0).Seconds())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armedAt.IsZero() {
		w.armedAt = now
	}
	w.partitions = c.Partitions
	if at.After(w.newest[c.Partition]) {
		w.newest[c.Partition] = at
	}
}

// ages calls fn with the age of each partition's newest canary at now,
// nothing before the first canary.
func (w *canaryWatch) ages(now time.Time, fn func(p int, age time.Duration)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armedAt.IsZero() {
		return
	}
	for p := range w.partitions {
		last := w.newest[p]
		if last.Before(w.armedAt) {
			last = w.armedAt
		}
		fn(p, now.Sub(last))
	}
}

// stale returns an error naming the oldest partition when its canary is
// older than maxAge (0: never).
func (w *canaryWatch) stale(now time.Time) error {
	if w.maxAge <= 0 {
		return nil
	}
	worst, oldest := -1, time.Duration(0)
	w.ages(now, func(p int, age time.Duration) {
		if age > oldest {
			worst, oldest = p, age
		}
	})
	if oldest <= w.maxAge {
		return nil
	}
	return danmaku.Errorf(danmaku.EUNAVAILABLE, "", "no delivery canary of partition %d for %v (comet.canary_max_age %v): messages are not reaching this comet",
		worst, oldest.Round(100*time.Millisecond), w.maxAge)
}

// Describe is prometheus.Collector's.
func (w *canaryWatch) Describe(ch chan<- *prometheus.Desc) { ch <- w.age }

// Collect is prometheus.Collector's.
func (w *canaryWatch) Collect(ch chan<- prometheus.Metric) {
	w.ages(time.Now(), func(p int, age time.Duration) {
		ch <- prometheus.MustNewConstMetric(w.age, prometheus.GaugeValue, age.Seconds(), strconv.Itoa(p))
	})
}
