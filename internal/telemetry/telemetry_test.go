package telemetry

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"

	"github.com/danmaku/danmaku/internal/config"
)

// The console format writes colour codes only to a terminal.
func TestConsoleColourOnlyOnTerminal(t *testing.T) {
	c := config.DefaultLog()
	c.Format = "console"
	for _, colour := range []bool{false, true} {
		var buf bytes.Buffer
		log, err := newLogger(c, zapcore.AddSync(&buf), colour)
		if err != nil {
			t.Fatal(err)
		}
		log.Warn("hello", zapcore.Field{Key: "k", Type: zapcore.StringType, String: "v"})
		log.Sync()
		out := buf.String()
		if !strings.Contains(out, "WARN") || !strings.Contains(out, "hello") {
			t.Fatalf("colour %v: %q", colour, out)
		}
		if got := strings.Contains(out, "\x1b["); got != colour {
			t.Errorf("colour %v: escape codes present = %v in %q", colour, got, out)
		}
	}
	// A pipe or file is not a terminal.
	if colourTerminal(nil) {
		t.Error("nil file taken for a terminal")
	}
}

func TestJSONFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(config.DefaultLog(), zapcore.AddSync(&buf), true)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("x")
	if !strings.HasPrefix(buf.String(), `{"level":"info"`) {
		t.Fatalf("json: %q", buf.String())
	}
}

// scrape returns what Handler serves for g.
func scrape(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler(g).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestMetrics(t *testing.T) {
	counter := func(name string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "test"})
		c.Inc()
		return c
	}

	// nil: a private registry, served as registered.
	reg, g := Metrics(nil)
	reg.MustRegister(counter("private_total"))
	if got := scrape(t, g); !strings.Contains(got, "private_total 1") {
		t.Fatalf("private registry serves:\n%s", got)
	}
	if got := scrape(t, prometheus.DefaultGatherer); strings.Contains(got, "private_total") {
		t.Fatal("nil registerer reached the global registry")
	}

	// A registry: used as it is.
	shared := prometheus.NewRegistry()
	reg, g = Metrics(shared)
	reg.MustRegister(counter("shared_total"))
	if got := scrape(t, shared); !strings.Contains(got, "shared_total 1") || g != prometheus.Gatherer(shared) {
		t.Fatalf("shared registry serves:\n%s", got)
	}

	// A registerer that cannot be gathered: the metrics reach it and a
	// private registry that serves them.
	outer := prometheus.NewRegistry()
	reg, g = Metrics(prometheus.WrapRegistererWithPrefix("outer_", outer))
	c := counter("tee_total")
	reg.MustRegister(c)
	if got := scrape(t, outer); !strings.Contains(got, "outer_tee_total 1") {
		t.Fatalf("outer registry serves:\n%s", got)
	}
	if got := scrape(t, g); !strings.Contains(got, "\ntee_total 1") {
		t.Fatalf("own registry serves:\n%s", got)
	}
	if err := reg.Register(c); err == nil {
		t.Fatal("registering twice succeeded")
	}
	if !reg.Unregister(c) || strings.Contains(scrape(t, outer), "tee_total") || strings.Contains(scrape(t, g), "tee_total") {
		t.Fatal("unregister left the counter behind")
	}
}

// A JSON line's ts is RFC 3339 in UTC with milliseconds, not a float epoch.
func TestJSONTimeRFC3339(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(config.DefaultLog(), zapcore.AddSync(&buf), false)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Millisecond)
	log.Info("x")
	var line struct{ TS any }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	s, ok := line.TS.(string)
	if !ok || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(s) {
		t.Fatalf("ts = %#v, want RFC 3339 with milliseconds in UTC", line.TS)
	}
	if ts, err := time.Parse(time.RFC3339Nano, s); err != nil || ts.Before(before) || time.Since(ts) > time.Minute {
		t.Fatalf("ts %s: %v", s, err)
	}
}

// Precreate makes every combination of the given label values a series.
func TestPrecreate(t *testing.T) {
	reg := prometheus.NewRegistry()
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"op", "result"})
	reg.MustRegister(v)
	Precreate(v.MetricVec, []string{"a", "b"}, []string{"ok", "error", "late"})
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].Metric) != 6 {
		t.Fatalf("gathered %v %v", mfs, err)
	}
}
