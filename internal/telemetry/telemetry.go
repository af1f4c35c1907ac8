// Package telemetry builds the zap logger and the Prometheus registry every
// role uses. Each package registers its own metrics on the registry it is
// given; nothing uses the global default registry.
package telemetry

import (
	"fmt"
	"net/http"
	"time"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger builds a logger from c: JSON for production, a coloured console
// for development, with sampling so a burst of identical lines costs little.
func NewLogger(c config.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("parse log level: %w", err)
	}
	zc := zap.NewProductionConfig()
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		zc.EncoderConfig.EncodeTime = zapcore.TimeEncoderOfLayout(time.TimeOnly + ".000")
		zc.Development = false
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.Sampling = nil
	if c.SampleFirst > 0 {
		zc.Sampling = &zap.SamplingConfig{Initial: c.SampleFirst, Thereafter: max(c.SampleThereafter, 1)}
	}
	return zc.Build()
}

// NewRegistry returns a registry holding the Go runtime and process
// collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus text format.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
