package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit/stack"
)

// documentedMetrics reads the metrics table of docs/operations.md: each
// row's name and labels.
func documentedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stack.Root(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(danmaku_[a-z_]+)` \\| [a-z]+ \\| ([a-z_,]*) *\\|")
	out := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		out[m[1]] = labels
	}
	if len(out) < 40 {
		t.Fatalf("found %d metrics in docs/operations.md; the table's format changed?", len(out))
	}
	return out
}

// Every metric the operations guide documents is on its role's /metrics
// from the start, before any event, with its documented labels: a
// dashboard or an alert over a series that appears only with its first
// event shows "no data" until then.
func TestDocumentedMetricsExistAtStart(t *testing.T) {
	docs := documentedMetrics(t)
	s := stack.New(t, stack.Options{Comets: 1, NoWarmUp: true})
	scraped := map[string]string{
		"logic": string(getOK(t, s.LogicURL+"/metrics")),
		"job":   string(getOK(t, "http://"+s.Jobs[0].Metrics+"/metrics")),
		"comet": string(getOK(t, "http://"+s.Comets[0].Internal+"/metrics")),
	}
	for name, labels := range docs {
		role := strings.Split(name, "_")[1]
		body, ok := scraped[role]
		if !ok {
			t.Errorf("%s: no role %q", name, role)
			continue
		}
		series := regexp.MustCompile("(?m)^"+name+"(_bucket|_count|_sum)?(\\{[^}]*\\})? ").FindAllString(body, -1)
		if len(series) == 0 {
			t.Errorf("%s is documented but not on the %s's /metrics at start", name, role)
			continue
		}
		for _, l := range labels {
			if !strings.Contains(strings.Join(series, "\n"), l+"=") {
				t.Errorf("%s: no series with the documented label %s: %q", name, l, series)
			}
		}
	}
}
