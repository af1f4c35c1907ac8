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

// Run validates the configuration, makes sure the topic exists, and starts
// the consumer and the metrics listener. It returns once they run.
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
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := kafkax.EnsureTopicWait(tctx, c.Kafka.Brokers, kafkax.Topic{Name: c.Kafka.Topic,
		Partitions: c.Kafka.Partitions, Replication: c.Kafka.Replication},
		func(err error) { log.Warn("kafka topic not ready, retrying", zap.Error(err)) }); err != nil {
		return fmt.Errorf("kafka topic %s: %w", c.Kafka.Topic, err)
	}
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
	mux := http.NewServeMux()
	mux.Handle("/metrics", telemetry.Handler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := m.job.Ready(r.Context()); err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, danmaku.Errorf(danmaku.ENOTFOUND, "path", "no endpoint %s", r.URL.Path))
	})
	m.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go m.metrics.Serve(ln)

	if err := m.job.Start(ctx); err != nil {
		return err
	}
	log.Info("job running", zap.String("owner", m.job.Owner()), zap.String("topic", c.Kafka.Topic),
		zap.Strings("brokers", c.Kafka.Brokers), zap.String("metrics", m.MetricsAddr))
	return nil
}

// Close stops the consumer gracefully (flush buffered rooms, commit, leave
// the group), then the metrics listener and the clients. Safe to call twice.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
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
