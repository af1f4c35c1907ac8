// Command archive consumes the room topic into the archive's database:
// every comment accepted during a stream, at its video offset, for replay
// over the recording (GET /logic/vod/... on logic). Several archive
// processes share the topic's partitions as one consumer group of their
// own, beside job's.
//
//	archive [flags]          run (migrating the schema first unless archive.migrate is off)
//	archive migrate [flags]  migrate the schema and exit
//
// Configuration: configs/archive.yaml (-config), DANMAKU_* variables and
// -<section>.<key> flags; -help lists every knob.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/archive"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/process"
	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/vodstore"
)

func main() {
	m := NewMain()
	if len(os.Args) > 1 && os.Args[1] == "migrate" {
		os.Args = append(os.Args[:1], os.Args[2:]...)
		m.MigrateOnly = true
	}
	process.Main("archive", &m.Config, m)
}

// Config is the whole configuration of the archive binary.
type Config = archive.BinaryConfig

// Main is the archive process: Run starts it, Close stops it gracefully.
type Main struct {
	Config Config
	// MigrateOnly makes Run migrate the schema and stop (Done closes).
	MigrateOnly bool
	// Logger, when set before Run, is used instead of one built from
	// Config.Log.
	Logger *zap.Logger
	// MetricsAddr is the bound address of /metrics, /healthz and /readyz,
	// set by Run.
	MetricsAddr string

	log       *zap.Logger
	store     vodstore.Store
	arc       *archive.Archive
	metrics   *http.Server
	consuming atomic.Bool
	stopStart context.CancelFunc
	startDone chan struct{}
	done      chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main holding the default configuration.
func NewMain() *Main { return &Main{Config: archive.DefaultBinaryConfig(), done: make(chan struct{})} }

// Done is closed when a migrate-only run finished.
func (m *Main) Done() <-chan struct{} { return m.done }

// Run validates the configuration, opens the database and the metrics
// listener, and in the background waits for the topic and starts
// consuming; /readyz says 503 until then. With MigrateOnly it migrates
// and closes Done.
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
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if m.store, err = vodstore.Open(octx, c.Archive.DSN); err != nil {
		return err
	}
	if c.Archive.Migrate || m.MigrateOnly {
		if err := m.store.Migrate(octx); err != nil {
			return err
		}
		log.Info("archive schema migrated", zap.Int("version", vodstore.SchemaVersion()))
	}
	if m.MigrateOnly {
		close(m.done)
		return nil
	}
	reg := telemetry.NewRegistry()
	m.arc, err = archive.New(c.Archive, archive.Deps{Kafka: c.Kafka, Store: m.store, Log: log, Registerer: reg})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Archive.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.Archive.MetricsAddr, err)
	}
	m.MetricsAddr = ln.Addr().String()
	m.metrics = &http.Server{Handler: m.mux(reg), ReadHeaderTimeout: 5 * time.Second}
	go m.metrics.Serve(ln)

	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stopStart, m.startDone = stop, make(chan struct{})
	go func() {
		defer close(m.startDone)
		if err := m.start(sctx); err != nil && sctx.Err() == nil {
			log.Error("archive not started", zap.Error(err))
		}
	}()
	return nil
}

func (m *Main) mux(reg prometheus.Gatherer) *http.ServeMux {
	return httpx.StatusMux(telemetry.Handler(reg), func(r *http.Request) error {
		if !m.consuming.Load() {
			return danmaku.Unavailable("kafka unreachable or the topic is missing: the consumer has not started", nil)
		}
		return m.arc.Ready(r.Context())
	})
}

// start waits until Kafka answers with the topic (creating it when it is
// missing), then starts the consumer.
func (m *Main) start(ctx context.Context) error {
	c := m.Config
	if _, err := kafkax.EnsureTopicWait(ctx, c.Kafka.Brokers, kafkax.Topic{Name: c.Kafka.Topic,
		Partitions: c.Kafka.Partitions, Replication: c.Kafka.Replication},
		func(err error) { m.log.Warn("kafka topic not ready, retrying", zap.Error(err)) }); err != nil {
		return fmt.Errorf("kafka topic %s: %w", c.Kafka.Topic, err)
	}
	if err := m.arc.Start(ctx); err != nil {
		return err
	}
	m.consuming.Store(true)
	m.log.Info("archive running", zap.String("group", c.Archive.Group), zap.String("topic", c.Kafka.Topic),
		zap.Strings("brokers", c.Kafka.Brokers), zap.String("metrics", m.MetricsAddr))
	return nil
}

// Close writes and commits the batch in hand, leaves the group, and closes
// the listener and the database. Safe to call twice.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if m.stopStart != nil {
			m.stopStart()
			<-m.startDone
		}
		if m.arc != nil {
			ctx, cancel := context.WithTimeout(context.Background(), m.Config.Archive.WriteTimeout+10*time.Second)
			errs = append(errs, m.arc.Shutdown(ctx))
			cancel()
		}
		if m.metrics != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			errs = append(errs, m.metrics.Shutdown(ctx))
			cancel()
		}
		if m.store != nil {
			errs = append(errs, m.store.Close())
		}
		if m.log != nil {
			m.log.Info("archive stopped")
			m.log.Sync()
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}
