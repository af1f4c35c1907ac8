package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

// Settings of the canary in the stacks of these tests: canaries every
// 250 ms, a comet unready once a partition's newest is 3 s old.
const (
	canaryInterval = 250 * time.Millisecond
	canaryMaxAge   = 3 * time.Second
	// topicPartitions is kafka.partitions of configs/logic.yaml, the
	// topic logic creates.
	topicPartitions = 16
)

// canaryOptions are stack options with the canary settings above.
func canaryOptions(o stack.Options) stack.Options {
	o.Logic = append(o.Logic, "-logic.canary_interval", canaryInterval.String())
	o.Comet = append(o.Comet, "-comet.canary_max_age", canaryMaxAge.String())
	return o
}

// waitCanaryGreen waits until every comet and, when jobs is true, the
// jobs of s report every partition's canary at most 1 s old, and every
// comet's /readyz answers 200.
func waitCanaryGreen(t *testing.T, s *stack.Stack, d time.Duration, jobs bool) {
	t.Helper()
	testkit.SucceedsSoon(t, d, func() error {
		for _, c := range s.Comets {
			if err := stack.CanaryFresh("http://"+c.Internal+"/metrics", stack.CometCanaryAge, topicPartitions, time.Second); err != nil {
				return err
			}
			if code, body := stack.Status("http://" + c.Public + "/readyz"); code != http.StatusOK {
				return fmt.Errorf("comet %s readyz %d %s", c.ID, code, body)
			}
		}
		if !jobs {
			return nil
		}
		var urls []string
		for _, j := range s.Jobs {
			urls = append(urls, "http://"+j.Metrics+"/metrics")
		}
		return stack.JobsCanaryFresh(urls, topicPartitions, time.Second)
	})
}

// waitUnready waits until the comet's /readyz says 503 naming the
// canary, and returns how long that took from since.
func waitUnready(t *testing.T, c *stack.Comet, since time.Time, d time.Duration) time.Duration {
	t.Helper()
	testkit.SucceedsSoon(t, d, func() error {
		code, body := stack.Status("http://" + c.Public + "/readyz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "canary") {
			return fmt.Errorf("comet %s readyz %d %s, want 503 naming the canary", c.ID, code, body)
		}
		return nil
	})
	return time.Since(since)
}

// The canary in a healthy stack is fresh on every comet and job for every
// partition; with job stopped (SIGSTOP) every comet's canary goes stale
// and its /readyz says 503 within canary_max_age plus a little; with job
// continued both are green again, without a restart. Viewers never see a
// canary. (Broken on purpose: with Ready not consulting the canary, or
// the comet dropping canary pushes, the test fails at the 503 or at the
// fresh check.)
func TestCanaryStaleWhileJobStopped(t *testing.T) {
	s := stack.New(t, canaryOptions(stack.Options{Comets: 2}))
	room := testkit.Uniq("idle-")
	v := s.Viewer(t, room, s.Comets[0])
	waitCanaryGreen(t, s, 20*time.Second, true)

	stopped := time.Now()
	s.Jobs[0].Pause(t)
	for _, c := range s.Comets {
		took := waitUnready(t, c, stopped, canaryMaxAge+5*time.Second)
		t.Logf("comet %s not ready %v after job stopped (canary_max_age %v)", c.ID, took.Round(10*time.Millisecond), canaryMaxAge)
	}
	if code, _ := stack.Status("http://" + s.Comets[0].Public + "/healthz"); code != http.StatusOK {
		t.Errorf("comet healthz %d while job is stopped: the comet itself is alive", code)
	}
	s.Jobs[0].Continue(t)
	waitCanaryGreen(t, s, 20*time.Second, true)

	if n := len(v.Frames()) + len(v.Notices("all")) + len(v.Notices("user")); n != 0 {
		t.Errorf("a viewer of an idle room got %d frames: canaries reached it", n)
	}
	keys, err := s.Keys("*canary*")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ttl, err := s.RDB().TTL(context.Background(), k).Result()
		if err != nil || ttl <= 0 {
			t.Errorf("canary key %q has TTL %v (%v): only claims that expire may hold a canary id", k, ttl, err)
		}
	}
	t.Logf("%d canary claims in Redis, each with a TTL", len(keys))
}
