// Command logic runs the HTTP API that accepts comments and produces them
// to Kafka. Configuration: configs/logic.yaml (-config), DANMAKU_* variables
// and -<section>.<key> flags; -help lists every knob.
package main

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/process"
	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/logic"
	"github.com/danmaku/danmaku/route"
	"github.com/danmaku/danmaku/vodstore"
	"github.com/danmaku/danmaku/web"
)

func main() {
	m := NewMain()
	process.Main("logic", &m.Config, m)
}

// Config is the whole configuration of the logic binary.
type Config = logic.BinaryConfig

// DefaultConfig returns the defaults of every section.
func DefaultConfig() Config { return logic.DefaultBinaryConfig() }

// Main is the logic process: Run starts it, Close stops it.
type Main struct {
	Config Config
	// Logger, when set before Run, is used instead of one built from
	// Config.Log.
	Logger *zap.Logger

	log   *zap.Logger
	rdb   redis.UniversalClient
	vod   vodstore.Store // nil without logic.archive_dsn
	logic *logic.Server

	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main holding the default configuration.
func NewMain() *Main { return &Main{Config: DefaultConfig()} }

// Run validates the configuration, builds the server and starts it: it
// listens (a port in use fails at once) and serves at once; the topic is
// created in the background once Kafka answers, and /readyz says 503 until
// then. It returns once the server runs; it serves until Close.
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
	// route.Dial lets per-request deadlines (logic.redis_timeout) reach the
	// socket, so a stalled Redis cannot hold requests for ReadTimeout. It
	// connects on first use.
	var verifier *auth.Verifier
	if c.Logic.Auth == config.AuthJWT {
		if verifier, err = auth.New(auth.Config(c.Auth)); err != nil {
			return err
		}
	}
	deps := logic.Deps{Log: log, Registerer: telemetry.NewRegistry(), Kafka: c.Kafka, Verifier: verifier,
		Console: web.Console()}
	if c.Logic.ArchiveDSN != "" {
		// Opening connects lazily (PostgreSQL) or opens the file (SQLite):
		// the VOD API answers 503 while the database does not answer.
		if m.vod, err = vodstore.Open(ctx, c.Logic.ArchiveDSN); err != nil {
			return err
		}
		deps.VOD = m.vod
	}
	m.rdb = route.Dial(c.Redis)
	deps.Store = route.New(m.rdb)
	m.logic, err = logic.New(c.Logic, deps)
	if err != nil {
		return err
	}
	if err := m.logic.Start(ctx); err != nil {
		return err
	}
	process.CheckRedis(ctx, m.rdb, c.Redis, log)
	return nil
}

// Reload re-reads the blocked-word list (SIGHUP); a list that fails to
// load is logged and the old one stays.
func (m *Main) Reload() {
	if m.logic == nil {
		return
	}
	if err := m.logic.ReloadWords(); err != nil {
		m.log.Error("blocked words not reloaded; the previous list stays", zap.Error(err))
	}
}

// Addr is the address the server listens on (useful with port 0).
func (m *Main) Addr() string {
	if m.logic == nil {
		return ""
	}
	return m.logic.Addr()
}

// Close stops accepting, lets in-flight requests finish and flushes the
// Kafka producer (within logic.shutdown_timeout), then closes Redis. Safe
// to call more than once and after a failed Run.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		if m.logic != nil {
			m.closeErr = m.logic.Shutdown(context.Background())
		}
		if m.rdb != nil {
			m.rdb.Close()
		}
		if m.vod != nil {
			m.vod.Close()
		}
		if m.log != nil {
			m.log.Sync()
		}
	})
	return m.closeErr
}
