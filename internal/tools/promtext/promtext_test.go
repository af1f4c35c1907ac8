package promtext

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Scrape reads what a registry serves: a series by its exact label set,
// and a family summed by one label.
func TestParseText(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t_dropped_total", Help: "h"}, []string{"reason", "room"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "t_open", Help: "h"})
	reg.MustRegister(c, g)
	c.WithLabelValues("overflow", "a").Add(2)
	c.WithLabelValues("overflow", "b").Add(3)
	c.WithLabelValues("cooldown", "a").Inc()
	g.Set(7)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	s, err := Scrape(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		"t_open": 7, `t_dropped_total{reason="overflow",room="b"}`: 3, `t_dropped_total{room="a",reason="cooldown"}`: 1,
	} {
		if v, err := s.Value(series); err != nil || v != want {
			t.Errorf("%s = %v, %v; want %v", series, v, err, want)
		}
	}
	for _, missing := range []string{"t_closed", `t_dropped_total{reason="overflow"}`, `t_open{x="1"}`, `t_open{x=1}`} {
		if v, err := s.Value(missing); err == nil {
			t.Errorf("%s = %v, want an error", missing, v)
		}
	}
	if got := s.ByLabel("t_dropped_total", "reason"); len(got) != 2 || got["overflow"] != 5 || got["cooldown"] != 1 {
		t.Errorf("by reason: %v", got)
	}
}

// Series names samples as the text exposition does: a histogram's
// buckets, sum and count apart.
func TestSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "t_seconds", Help: "h", Buckets: []float64{0.5, 1}}, []string{"op"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "t_open", Help: "h"})
	reg.MustRegister(h, g)
	h.WithLabelValues("send").Observe(0.7)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	s, err := Scrape(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	series := s.Series()
	var les []string
	for _, l := range series["t_seconds_bucket"] {
		if l["op"] != "send" {
			t.Errorf("bucket labels %v", l)
		}
		les = append(les, l["le"])
	}
	if !slices.Equal(les, []string{"0.5", "1", "+Inf"}) {
		t.Errorf("buckets le %v", les)
	}
	if len(series["t_seconds_sum"]) != 1 || len(series["t_seconds_count"]) != 1 || len(series["t_open"]) != 1 || len(series["t_seconds"]) != 0 {
		t.Errorf("series %v", series)
	}
}
