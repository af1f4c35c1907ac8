package stack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/danmaku/danmaku/internal/tools/promtext"
)

// The series of the delivery canary's ages, per partition.
const (
	CometCanaryAge = "danmaku_comet_canary_age_seconds"
	JobCanaryAge   = "danmaku_job_canary_age_seconds"
)

// CanaryAges scrapes metric (CometCanaryAge or JobCanaryAge) at the
// /metrics URL: the age in seconds per partition.
func CanaryAges(url, metric string) (map[string]float64, error) {
	s, err := promtext.Scrape(context.Background(), url)
	if err != nil {
		return nil, err
	}
	return s.ByLabel(metric, "partition"), nil
}

// CanaryFresh reports an error unless metric at url has n partitions, each
// at most limit old.
func CanaryFresh(url, metric string, n int, limit time.Duration) error {
	ages, err := CanaryAges(url, metric)
	if err != nil {
		return err
	}
	return agesWithin(url, metric, ages, n, limit)
}

// JobsCanaryFresh: over the jobs' /metrics URLs, every one of n
// partitions is held by a job whose canary of it is at most limit old.
func JobsCanaryFresh(urls []string, n int, limit time.Duration) error {
	held := map[string]float64{}
	for _, u := range urls {
		ages, err := CanaryAges(u, JobCanaryAge)
		if err != nil {
			return err
		}
		for p, a := range ages {
			if old, ok := held[p]; !ok || a < old {
				held[p] = a
			}
		}
	}
	return agesWithin("the jobs", JobCanaryAge, held, n, limit)
}

func agesWithin(where, metric string, ages map[string]float64, n int, limit time.Duration) error {
	if len(ages) != n {
		return fmt.Errorf("%s: %s has %d partitions, want %d: %v", where, metric, len(ages), n, ages)
	}
	for p, age := range ages {
		if age > limit.Seconds() {
			return fmt.Errorf("%s: %s{partition=%s} = %.2f s, want at most %v", where, metric, p, age, limit)
		}
	}
	return nil
}

// Status returns the status and body of GET url (0 and the error when it
// does not answer within 2 s).
func Status(url string) (int, string) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
