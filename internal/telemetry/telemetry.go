// Package telemetry builds the zap logger and the Prometheus registry every
// role uses. Each package registers its own metrics on the registry it is
// given; nothing uses the global default registry.
package telemetry

import (
	"fmt"
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
// production, a human-readable console format for development, with
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
		enc = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	}
	core := zapcore.NewCore(enc, out, zap.NewAtomicLevelAt(level))
	if c.SampleFirst > 0 {
		core = zapcore.NewSamplerWithOptions(core, time.Second, c.SampleFirst, max(c.SampleThereafter, 1))
	}
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.Lock(os.Stderr))), nil
}

// colourTerminal reports whether f is a terminal that should get colours.
func colourTerminal(f *os.File) bool {
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
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
