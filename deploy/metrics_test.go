package deploy_test

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/tools/promtext"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// exposition is what the binaries' /metrics served: for each metric name
// (as sampled: histograms as _bucket, _sum, _count), its series' labels.
type exposition map[string][]map[string]string

// scrape reads the /metrics page at url into e.
func (e exposition) scrape(url string) error {
	s, err := promtext.Scrape(context.Background(), url)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	for name, series := range s.Series() {
		e[name] = append(e[name], series...)
	}
	return nil
}

// hasLabel reports whether some series of name carries label (with value,
// when value is not empty).
func (e exposition) hasLabel(name, label, value string) bool {
	for _, ls := range e[name] {
		if v, ok := ls[label]; ok && (value == "" || v == value) {
			return true
		}
	}
	return false
}

var (
	// selectorRe finds a series selector of ours: the name and its
	// optional matchers.
	selectorRe = regexp.MustCompile(`\b(danmaku_[a-z0-9_]+)(\{([^}]*)\})?`)
	// matcherRe is one label matcher.
	matcherRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	// groupingRe finds the labels of by (...) and without (...).
	groupingRe = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// targetLabels are added by Prometheus at scrape time, not by the binaries.
var targetLabels = map[string]bool{"instance": true, "job": true}

// missingSeries returns what a query names that the exposition lacks: a
// metric name, a label a matcher or a grouping uses, or the value an
// equality matcher asks for (a vector whose label values appear only after
// their first event would leave a panel empty and an alert silent).
func (e exposition) missingSeries(q string) []string {
	var miss []string
	var names []string
	for _, m := range selectorRe.FindAllStringSubmatch(q, -1) {
		name := m[1]
		names = append(names, name)
		if len(e[name]) == 0 {
			miss = append(miss, name)
			continue
		}
		for _, mm := range matcherRe.FindAllStringSubmatch(m[3], -1) {
			label, op, value := mm[1], mm[2], mm[3]
			if op != "=" {
				value = ""
			}
			if !e.hasLabel(name, label, value) {
				miss = append(miss, fmt.Sprintf("%s{%s%s%q}", name, label, op, mm[3]))
			}
		}
	}
	for _, g := range groupingRe.FindAllStringSubmatch(q, -1) {
		for _, label := range strings.Split(g[1], ",") {
			label = strings.TrimSpace(label)
			if label == "" || targetLabels[label] {
				continue
			}
			for _, name := range names {
				if len(e[name]) > 0 && !e.hasLabel(name, label, "") {
					miss = append(miss, fmt.Sprintf("%s by %s", name, label))
				}
			}
		}
	}
	return miss
}

// TestDashboardAndAlertSeriesExist starts the role binaries (logic, job,
// comet on a real redis-server and the dev Kafka broker), lets a message
// through and a viewer resume, then checks that every series, label and
// label value the dashboard's panels and the alert rules name is served on
// the roles' /metrics: a renamed metric or a label value that appears only
// after its first event would leave a panel empty or an alert silent.
func TestDashboardAndAlertSeriesExist(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1, Jobs: 1})
	room := testkit.Uniq("dash_")
	v := s.Viewer(t, room, s.Comets[0])
	ids, err := stack.Post(s.LogicURL, room, 7, "dash", []string{"one", "two"})
	if err != nil {
		t.Fatal(err)
	}
	wsviewer.Delivered(t, 20*time.Second, ids, v)
	v.Drop()
	v.Resume(t)
	// The canary ages exist once a canary went through job to the comet.
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		for _, addr := range []string{s.Comets[0].Internal, s.Jobs[0].Metrics} {
			sc, err := promtext.Scrape(context.Background(), "http://"+addr+"/metrics")
			if err != nil {
				return err
			}
			if len(sc.Series()["danmaku_comet_canary_age_seconds"])+len(sc.Series()["danmaku_job_canary_age_seconds"]) == 0 {
				return fmt.Errorf("%s: no canary age yet", addr)
			}
		}
		return nil
	})

	e := exposition{}
	for _, u := range []string{s.LogicURL + "/metrics", "http://" + s.Jobs[0].Metrics + "/metrics", "http://" + s.Comets[0].Internal + "/metrics"} {
		if err := e.scrape(u); err != nil {
			t.Fatal(err)
		}
	}
	queries := append(dashboardExprs(t), ruleExprs(t)...)
	seen := map[string]bool{}
	for _, q := range queries {
		for _, m := range e.missingSeries(q.expr) {
			if !seen[q.where+m] {
				seen[q.where+m] = true
				t.Errorf("%s: %s is not served by the binaries", q.where, m)
			}
		}
	}
	if t.Failed() {
		var names []string
		for n := range e {
			if strings.HasPrefix(n, "danmaku_") {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		t.Logf("served: %s", strings.Join(names, " "))
	}
}

// TestMissingSeries pins the checker: names, matchers, values and
// groupings are each caught.
func TestMissingSeries(t *testing.T) {
	e := exposition{
		"danmaku_job_undelivered_total":  {{"reason": "no_comets"}, {"reason": "rejected"}},
		"danmaku_job_lag_seconds_bucket": {{"le": "1"}},
	}
	for q, want := range map[string]string{
		`sum(rate(danmaku_job_undelivered_total[5m]))`:                                   "",
		`sum by (reason) (rate(danmaku_job_undelivered_total{reason!="x"}[5m]))`:         "",
		`sum by (instance, le) (rate(danmaku_job_lag_seconds_bucket[$__rate_interval]))`: "",
		`rate(danmaku_job_undelivered_total{reason="unauthorized"}[5m])`:                 `danmaku_job_undelivered_total{reason="unauthorized"}`,
		`rate(danmaku_job_undelivered_total{code=~"5.."}[5m])`:                           `danmaku_job_undelivered_total{code=~"5.."}`,
		`sum by (code) (rate(danmaku_job_undelivered_total[5m]))`:                        "danmaku_job_undelivered_total by code",
		`danmaku_job_gone_total`: "danmaku_job_gone_total",
	} {
		got := strings.Join(e.missingSeries(q), "; ")
		if got != want {
			t.Errorf("%s: missing %q, want %q", q, got, want)
		}
	}
}
