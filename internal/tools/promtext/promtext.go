// Package promtext reads a role's /metrics page (the Prometheus text
// exposition) with the Prometheus parser: the load tool reads job's drop
// counters with it, the end-to-end tests a child process's series.
package promtext

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scraped is one reading of a /metrics page (the Prometheus text
// exposition), by metric family name.
type Scraped map[string]*dto.MetricFamily

// Scrape reads the /metrics page at url within five seconds.
func Scrape(ctx context.Context, url string) (Scraped, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseText(io.LimitReader(resp.Body, 16<<20))
}

// parseText reads the Prometheus text exposition.
func parseText(r io.Reader) (Scraped, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return mfs, nil
}

// Value returns the value of one series, written as exposed: a name and
// its exact label set, as in `danmaku_job_dropped_total{reason="overflow"}`
// or `danmaku_comet_connections`. Counters, gauges and untyped series have
// a value; for a histogram or summary it is the sample count.
func (s Scraped) Value(series string) (float64, error) {
	name, labels, err := splitSeries(series)
	if err != nil {
		return 0, err
	}
	mf := s[name]
	if mf == nil {
		return 0, fmt.Errorf("no metric %s", name)
	}
	for _, m := range mf.GetMetric() {
		if sameLabels(m.GetLabel(), labels) {
			return value(m), nil
		}
	}
	return 0, fmt.Errorf("no series %s", series)
}

// ByLabel sums the series of metric name by the value of one label, as in
// danmaku_job_dropped_total by reason.
func (s Scraped) ByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range s[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += value(m)
			}
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount())
	default:
		return m.GetUntyped().GetValue()
	}
}

// splitSeries splits `name{a="x",b="y"}` into the name and the label
// pairs.
func splitSeries(series string) (string, [][2]string, error) {
	name, rest, ok := strings.Cut(series, "{")
	if !ok {
		return series, nil, nil
	}
	rest, ok = strings.CutSuffix(rest, "}")
	if !ok {
		return "", nil, fmt.Errorf("series %q: want name{label=\"value\",...}", series)
	}
	var labels [][2]string
	for _, pair := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return "", nil, fmt.Errorf("series %q: want name{label=\"value\",...}", series)
		}
		labels = append(labels, [2]string{k, v[1 : len(v)-1]})
	}
	return name, labels, nil
}

// sameLabels reports whether have is exactly the label set want.
func sameLabels(have []*dto.LabelPair, want [][2]string) bool {
	if len(have) != len(want) {
		return false
	}
	for _, l := range have {
		if !slices.Contains(want, [2]string{l.GetName(), l.GetValue()}) {
			return false
		}
	}
	return true
}

// Series lists every sample as the text exposition names it, with its
// labels: a histogram as name_bucket (with "le"), name_sum and name_count,
// a summary as name (with "quantile"), name_sum and name_count.
func (s Scraped) Series() map[string][]map[string]string {
	out := map[string][]map[string]string{}
	add := func(name string, m *dto.Metric, extra ...string) {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			labels[extra[i]] = extra[i+1]
		}
		out[name] = append(out[name], labels)
	}
	for name, mf := range s {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Histogram != nil:
				// The parser keeps the +Inf bucket among the others.
				for _, b := range m.Histogram.GetBucket() {
					add(name+"_bucket", m, "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				add(name+"_sum", m)
				add(name+"_count", m)
			case m.Summary != nil:
				for _, q := range m.Summary.GetQuantile() {
					add(name, m, "quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64))
				}
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out
}
