package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/tools/promtext"
)

// The all-in-one writes the delivery canary like the role binaries: logic
// writes one per partition, its job pushes them to its comet, and both
// record the age of the newest per partition; logic.canary_interval 0
// turns it off.
func TestCanaryAllInOne(t *testing.T) {
	scrape := func(m *Main) (promtext.Scraped, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return promtext.Scrape(ctx, m.URL()+"metrics")
	}
	t.Run("on", func(t *testing.T) {
		m := startMain(t, func(c *Config) { c.Logic.CanaryInterval = 200 * time.Millisecond })
		testkit.SucceedsSoon(t, 30*time.Second, func() error {
			sc, err := scrape(m)
			if err != nil {
				return err
			}
			for _, metric := range []string{"danmaku_job_canary_age_seconds", "danmaku_comet_canary_age_seconds"} {
				ages := sc.ByLabel(metric, "partition")
				if len(ages) != 2 {
					return fmt.Errorf("%s: %v, want 2 partitions", metric, ages)
				}
				for p, age := range ages {
					if age > 2 {
						return fmt.Errorf("%s{partition=%s} = %v s", metric, p, age)
					}
				}
			}
			return nil
		})
	})
	t.Run("off", func(t *testing.T) {
		m := startMain(t, func(c *Config) { c.Logic.CanaryInterval = 0 })
		// Five intervals of the run above: none is written.
		time.Sleep(time.Second)
		sc, err := scrape(m)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := sc.Value(`danmaku_logic_canaries_total{result="ok"}`); err != nil || n != 0 {
			t.Errorf("canaries written with logic.canary_interval 0: %v %v", n, err)
		}
		if ages := sc.ByLabel("danmaku_comet_canary_age_seconds", "partition"); len(ages) != 0 {
			t.Errorf("comet canary ages with logic.canary_interval 0: %v", ages)
		}
	})
}
