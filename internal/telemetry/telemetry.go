// Package telemetry builds the zap logger and the Prometheus registry every
// role uses. Each package registers its own metrics on the registry it is
// given; nothing uses the global default registry.
package telemetry

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/danmaku/danmaku/internal/config"
)

// NewLogger builds a logger from c writing to stderr: JSON for
// production (the time as "ts" in RFC 3339 with milliseconds, UTC), a human-readable console format for development, with
// sampling so a burst of identical lines costs little. The console format
// is coloured only when stderr is a terminal (and NO_COLOR is unset), so
// redirected logs hold no escape codes.
func NewLogger(c config.Log) (*zap.Logger, error) {
	return newLogger(c, zapcore.Lock(os.Stderr), colourTerminal(os.Stderr))
}

func newLogger(c config.Log, out zapcore.WriteSyncer, colour bool) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("parse log level: %w", err)
	}
	var enc zapcore.Encoder
	if c.Format == "console" {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		if colour {
			ec.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		ec.EncodeTime = zapcore.TimeEncoderOfLayout(time.TimeOnly + ".000")
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = rfc3339Millis
		enc = zapcore.NewJSONEncoder(ec)
	}
	core := zapcore.NewCore(enc, out, zap.NewAtomicLevelAt(level))
	if c.SampleFirst > 0 {
		core = zapcore.NewSamplerWithOptions(core, time.Second, c.SampleFirst, max(c.SampleThereafter, 1))
	}
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.Lock(os.Stderr))), nil
}

// rfc3339Millis writes a JSON line's "ts" as RFC 3339 in UTC with
// milliseconds (2026-11-25T21:43:40.123Z), which log stores and people read
// without converting a float epoch.
func rfc3339Millis(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendString(t.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// colourTerminal reports whether f is a terminal that should get colours.
func colourTerminal(f *os.File) bool {
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		return false
	}
	return Terminal(f)
}

// Terminal reports whether w is a terminal (a character device), where
// output redrawn in place or coloured is read by a person, not stored.
func Terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// NewRegistry returns a registry holding the Go runtime and process
// collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves g in the Prometheus text format. When g is also a
// Registerer (a *prometheus.Registry is), the handler's own error counter
// is registered on it.
func Handler(g prometheus.Gatherer) http.Handler {
	opts := promhttp.HandlerOpts{}
	if r, ok := g.(prometheus.Registerer); ok {
		opts.Registry = r
	}
	return promhttp.HandlerFor(g, opts)
}

// Metrics resolves the Registerer a role was given, with the one meaning
// of nil every role shares: nil means a private registry. It returns where
// the role registers its metrics and what the role's own /metrics serves:
// reg itself when it can also be gathered (a *prometheus.Registry can),
// else a private registry that receives the same metrics.
func Metrics(reg prometheus.Registerer) (prometheus.Registerer, prometheus.Gatherer) {
	if reg == nil {
		r := prometheus.NewRegistry()
		return r, r
	}
	if g, ok := reg.(prometheus.Gatherer); ok {
		return reg, g
	}
	own := prometheus.NewRegistry()
	return teeRegisterer{reg, own}, own
}

// teeRegisterer registers every collector on both of its registerers.
type teeRegisterer [2]prometheus.Registerer

func (t teeRegisterer) Register(c prometheus.Collector) error {
	if err := t[0].Register(c); err != nil {
		return err
	}
	if err := t[1].Register(c); err != nil {
		t[0].Unregister(c)
		return err
	}
	return nil
}

func (t teeRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t teeRegisterer) Unregister(c prometheus.Collector) bool {
	a := t[0].Unregister(c)
	b := t[1].Unregister(c)
	return a || b
}

// Precreate creates vec's series for every combination of the given label
// values (one list per label, in the vec's label order), each at zero. A
// series that exists only after its first event shows "no data" on a
// dashboard and never fires a rate alert, so every label value known in
// advance (reasons, results, codes) is created at registration.
func Precreate(vec *prometheus.MetricVec, values ...[]string) {
	var walk func(prefix []string, rest [][]string)
	walk = func(prefix []string, rest [][]string) {
		if len(rest) == 0 {
			if _, err := vec.GetMetricWithLabelValues(prefix...); err != nil {
				panic(fmt.Sprintf("telemetry: precreate %v: %v", prefix, err))
			}
			return
		}
		for _, v := range rest[0] {
			walk(append(prefix[:len(prefix):len(prefix)], v), rest[1:])
		}
	}
	walk(nil, values)
}
