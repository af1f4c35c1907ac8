// Command job consumes the room topic and delivers each room's messages to
// the comets holding its viewers. Several job processes share the topic's
// partitions as one consumer group.
// Configuration: configs/job.yaml (-config), DANMAKU_* variables and
// -<section>.<key> flags; -help lists every knob.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/kafkax"
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

	log     *zap.Logger
	rdb     redis.UniversalClient
	job     *job.Job
	pusher  *push.Client
	metrics *http.Server
	// consuming is set once the topic exists and the consumer started;
	// stopStart ends that start-up, startDone is closed when it returned.
	consuming atomic.Bool
	stopStart context.CancelFunc
	startDone chan struct{}

	closeOnce sync.Once
	closeErr  error
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
// consumer. /readyz says 503 until the consumer runs, so an unreachable
// Kafka keeps the job up and not ready instead of failing it. It returns
// once the listener serves.
func (m *Main) Run(ctx context.Context) error {
	if err := config.Validate(&m.Config); err != nil {
		return err
	}
	c := m.Config
	log, err := process.Logger(m.Logger, c.Log)
	if err != nil {
		return err
	}
	m.log = log
	reg := telemetry.NewRegistry()
	m.rdb = route.Dial(c.Redis)
	m.pusher = push.NewClient(c.Job.PushSecret, c.Job.PushTimeout)
	m.job, err = job.New(c.Job, job.Deps{Kafka: c.Kafka, Store: route.New(m.rdb),
		Pusher: m.pusher, Log: log, Registerer: reg})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Job.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.Job.MetricsAddr, err)
	}
	m.MetricsAddr = ln.Addr().String()
	mux := httpx.StatusMux(telemetry.Handler(reg), func(r *http.Request) error {
		if !m.consuming.Load() {
			return danmaku.Unavailable("kafka unreachable or the topic is missing: the consumer has not started", nil)
		}
		return m.job.Ready(r.Context())
	})
	m.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go m.metrics.Serve(ln)

	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stopStart, m.startDone = stop, make(chan struct{})
	go func() {
		defer close(m.startDone)
		if err := m.start(sctx); err != nil && sctx.Err() == nil {
			log.Error("job not started", zap.Error(err))
		}
	}()
	return nil
}

// start waits until Kafka answers with the topic (creating it when it is
// missing), retrying every second until ctx ends, then starts the consumer.
func (m *Main) start(ctx context.Context) error {
	c := m.Config
	if _, err := kafkax.EnsureTopicWait(ctx, c.Kafka.Brokers, kafkax.Topic{Name: c.Kafka.Topic,
		Partitions: c.Kafka.Partitions, Replication: c.Kafka.Replication},
		func(err error) { m.log.Warn("kafka topic not ready, retrying", zap.Error(err)) }); err != nil {
		return fmt.Errorf("kafka topic %s: %w", c.Kafka.Topic, err)
	}
	if err := m.job.Start(ctx); err != nil {
		return err
	}
	m.consuming.Store(true)
	m.log.Info("job running", zap.String("owner", m.job.Owner()), zap.String("topic", c.Kafka.Topic),
		zap.Strings("brokers", c.Kafka.Brokers), zap.String("metrics", m.MetricsAddr))
	return nil
}

// Close stops the consumer gracefully (flush buffered rooms, commit, leave
// the group), then the metrics listener and the clients. Safe to call twice.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if m.stopStart != nil {
			m.stopStart()
			<-m.startDone
		}
		if m.job != nil {
			ctx, cancel := context.WithTimeout(context.Background(), m.Config.Job.DrainTimeout+shutdownSlack)
			errs = append(errs, m.job.Shutdown(ctx))
			cancel()
		}
		if m.metrics != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			errs = append(errs, m.metrics.Shutdown(ctx))
			cancel()
		}
		if m.pusher != nil {
			m.pusher.Close()
		}
		if m.rdb != nil {
			errs = append(errs, m.rdb.Close())
		}
		if m.log != nil {
			m.log.Info("job stopped")
			m.log.Sync()
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}
