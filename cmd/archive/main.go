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
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/archive"
	"github.com/danmaku/danmaku/internal/config"
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

	arc  *archive.Archive
	role process.ConsumerRole
	done chan struct{}
}

// NewMain returns a Main holding the default configuration.
func NewMain() *Main { return &Main{Config: archive.DefaultBinaryConfig(), done: make(chan struct{})} }

// Done is closed when a migrate-only run finished.
func (m *Main) Done() <-chan struct{} { return m.done }

// Run validates the configuration, opens the database and the metrics
// listener, and in the background waits for the topic and starts
// consuming (process.ConsumerRole); /readyz says 503 until then. With
// MigrateOnly it migrates and closes Done.
func (m *Main) Run(ctx context.Context) error {
	if err := config.Validate(&m.Config); err != nil {
		return err
	}
	c := m.Config
	log, err := process.Logger(m.Logger, c.Log)
	if err != nil {
		return err
	}
	m.role = process.ConsumerRole{Name: "archive", Kafka: c.Kafka, MetricsAddr: c.Archive.MetricsAddr, Log: log,
		ShutdownTimeout: c.Archive.WriteTimeout + 10*time.Second,
		Fields:          []zap.Field{zap.String("group", c.Archive.Group)}}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := vodstore.Open(octx, c.Archive.DSN)
	if err != nil {
		return err
	}
	m.role.Closers = []func() error{store.Close}
	if c.Archive.Migrate || m.MigrateOnly {
		if err := store.Migrate(octx); err != nil {
			return err
		}
		log.Info("archive schema migrated", zap.Int("version", vodstore.SchemaVersion()))
	}
	if m.MigrateOnly {
		close(m.done)
		return nil
	}
	reg := telemetry.NewRegistry()
	m.arc, err = archive.New(c.Archive, archive.Deps{Kafka: c.Kafka, Store: store, Log: log, Registerer: reg})
	if err != nil {
		return err
	}
	m.role.Consumer, m.role.Metrics = m.arc, reg
	if err := m.role.Run(ctx); err != nil {
		return err
	}
	m.MetricsAddr = m.role.MetricsAddr
	return nil
}

// Close writes and commits the batch in hand, leaves the group, and closes
// the listener and the database. Safe to call twice.
func (m *Main) Close() error { return m.role.Close() }
