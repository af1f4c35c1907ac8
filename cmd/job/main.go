// Command job consumes the room topic and delivers each room's messages to
// the comets holding its viewers. Several job processes share the topic's
// partitions as one consumer group.
// Configuration: configs/job.yaml (-config), DANMAKU_* variables and
// -<section>.<key> flags; -help lists every knob.
package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/process"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/job"
	"github.com/danmaku/danmaku/route"
)

func main() {
	m := NewMain()
	process.Main("job", &m.Config, m)
}

// Config is the whole configuration of the job binary.
type Config = job.BinaryConfig

// DefaultConfig returns the defaults of every section.
func DefaultConfig() Config { return job.DefaultBinaryConfig() }

// Main is the job process: Run starts it, Close stops it gracefully.
type Main struct {
	Config Config
	// Logger, when set before Run, is used instead of one built from
	// Config.Log.
	Logger *zap.Logger
	// MetricsAddr is the bound address of /metrics, /healthz and /readyz,
	// set by Run.
	MetricsAddr string

	job  *job.Job
	role process.ConsumerRole
}

// shutdownSlack is what Close allows the job beyond its drain: the last
// commit and leaving the consumer group.
const shutdownSlack = 10 * time.Second

// NewMain returns a Main holding the default configuration.
func NewMain() *Main { return &Main{Config: DefaultConfig()} }

// Done is closed when the job stopped by itself (see job.Job.Done); nil
// before Run.
func (m *Main) Done() <-chan struct{} {
	if m.job == nil {
		return nil
	}
	return m.job.Done()
}

// Run validates the configuration and opens the metrics listener
// (/metrics, /healthz, /readyz); then, in the background, it waits until
// Kafka answers with the topic (creating it when missing) and starts the
// consumer (process.ConsumerRole). /readyz says 503 until the consumer
// runs, so an unreachable Kafka keeps the job up and not ready instead of
// failing it. It returns once the listener serves.
func (m *Main) Run(ctx context.Context) error {
	if err := config.Validate(&m.Config); err != nil {
		return err
	}
	c := m.Config
	log, err := process.Logger(m.Logger, c.Log)
	if err != nil {
		return err
	}
	reg := telemetry.NewRegistry()
	rdb := route.Dial(c.Redis)
	pusher := push.NewClient(c.Job.PushSecret, c.Job.PushTimeout)
	m.role = process.ConsumerRole{Name: "job", Kafka: c.Kafka, MetricsAddr: c.Job.MetricsAddr, Metrics: reg, Log: log,
		ShutdownTimeout: c.Job.DrainTimeout + shutdownSlack,
		Closers:         []func() error{func() error { pusher.Close(); return nil }, rdb.Close}}
	m.job, err = job.New(c.Job, job.Deps{Kafka: c.Kafka, Store: route.New(rdb),
		Pusher: pusher, Log: log, Registerer: reg})
	if err != nil {
		return err
	}
	m.role.Consumer, m.role.Fields = m.job, []zap.Field{zap.String("owner", m.job.Owner())}
	if err := m.role.Run(ctx); err != nil {
		return err
	}
	m.MetricsAddr = m.role.MetricsAddr
	return nil
}

// Close stops the consumer gracefully (flush buffered rooms, commit, leave
// the group), then the metrics listener and the clients. Safe to call twice.
func (m *Main) Close() error { return m.role.Close() }
