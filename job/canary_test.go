package job_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/tools/promtext"
)

// canaryRecord is the canary of partition p of n written at ts, with a
// key that hashes to p.
func canaryRecord(t *testing.T, id string, p, n int, ts time.Time) kafka.Message {
	t.Helper()
	v, err := danmaku.MarshalCanary(danmaku.Canary{ID: id, Partition: p, Partitions: n, TS: ts.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; ; k++ {
		key := []byte(danmaku.CanaryKeyPrefix + strconv.Itoa(k))
		if kafkax.Partition(key, n) == p {
			return kafka.Message{Key: key, Value: v}
		}
	}
}

// Canaries on every partition reach every comet (its age per partition
// appears and is small) and no viewer; the job records the age of each
// partition it pushed; a redelivered canary is a duplicate, pushed once.
func TestCanaryReachesEveryCometNoViewer(t *testing.T) {
	e := newEnv(t, 2)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	j := e.startJob(jobConfig(), nil)
	const n = 4
	var recs []kafka.Message
	for p := range n {
		recs = append(recs, canaryRecord(t, testkit.Uniq("canary-"), p, n, time.Now()))
	}
	e.write(recs...)
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		for _, c := range e.comets {
			const metric = "danmaku_comet_canary_age_seconds"
			ages, err := scrapedAges("http://"+c.InternalAddr()+"/metrics", metric)
			if err != nil {
				return err
			}
			if err := agesBelow(metric, ages, n, 15); err != nil {
				return err
			}
		}
		const metric = "danmaku_job_canary_age_seconds"
		return agesBelow(metric, gatheredAges(t, j.reg, metric), n, 15)
	})
	// Comets of other tests sharing the Redis may hold leases and fail
	// pushes: those canaries count as push_failed.
	results := func() string {
		var b []string
		for _, r := range []string{"pushed", "push_failed", "no_comet", "redis", "duplicate", "superseded"} {
			b = append(b, fmt.Sprintf("%s=%v", r, counter(t, j.reg, "danmaku_job_canaries_total", "result", r)))
		}
		return fmt.Sprint(b)
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if got := counter(t, j.reg, "danmaku_job_canaries_total", "result", "pushed") +
			counter(t, j.reg, "danmaku_job_canaries_total", "result", "push_failed"); got != n {
			return fmt.Errorf("canaries pushed %v, want %d: %s", got, n, results())
		}
		return nil
	})
	e.write(recs[0])
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if got := counter(t, j.reg, "danmaku_job_canaries_total", "result", "duplicate"); got != 1 {
			return fmt.Errorf("duplicate canaries %v, want 1: %s", got, results())
		}
		return nil
	})
	e.produce(room, danmaku.Message{ID: testkit.Uniq("m"), UID: 1, Name: "a", Content: "after", TS: time.Now().UnixMilli()})
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if v.total() != 1 {
			return fmt.Errorf("viewer has %d messages, want the one sent", v.total())
		}
		return nil
	})
	for _, f := range v.Frames() {
		if f.N != 1 {
			t.Errorf("viewer frame %+v: a canary reached it?", f)
		}
	}
}

// agesBelow reports an error unless ages has n partitions, each at most
// max seconds old.
func agesBelow(metric string, ages map[string]float64, n int, max float64) error {
	if len(ages) != n {
		return fmt.Errorf("%s: %d partitions %v, want %d", metric, len(ages), ages, n)
	}
	for p, a := range ages {
		if a > max {
			return fmt.Errorf("%s{partition=%s} = %v", metric, p, a)
		}
	}
	return nil
}

// scrapedAges reads metric's value per partition from a /metrics URL.
func scrapedAges(url, metric string) (map[string]float64, error) {
	s, err := promtext.Scrape(context.Background(), url)
	if err != nil {
		return nil, err
	}
	return s.ByLabel(metric, "partition"), nil
}

// gatheredAges reads metric's value per partition from reg.
func gatheredAges(t *testing.T, reg *prometheus.Registry, metric string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ages := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == metric {
			for _, m := range mf.GetMetric() {
				ages[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return ages
}
