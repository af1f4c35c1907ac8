// Command logic runs the HTTP API that accepts comments and produces them
// to Kafka. Configuration: configs/logic.yaml (-config), DANMAKU_* variables
// and -<section>.<key> flags; -help lists every knob.
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

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/process"
	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/logic"
	"github.com/danmaku/danmaku/route"
)

func main() {
	m := NewMain()
	process.Main("logic", &m.Config, m)
}

// Config is the whole configuration of the logic binary.
type Config struct {
	Log   config.Log   `yaml:"log"`
	Redis config.Redis `yaml:"redis"`
	Kafka config.Kafka `yaml:"kafka"`
	Logic logic.Config `yaml:"logic"`
}

// DefaultConfig returns the defaults of every section.
func DefaultConfig() Config {
	return Config{
		Log:   config.DefaultLog(),
		Redis: config.DefaultRedis(),
		Kafka: config.DefaultKafka(),
		Logic: logic.DefaultConfig(),
	}
}

// Validate checks what the binary needs beyond its sections' own rules.
func (c *Config) Validate() error {
	if err := config.RequireRedis(c.Redis); err != nil {
		return err
	}
	return config.RequireKafka(c.Kafka)
}

// topicWait is how long start-up keeps trying to reach Kafka to create the
// topic: long enough for a broker started at the same time to come up.
const topicWait = 30 * time.Second

// Main is the logic process: Run starts it, Close stops it.
type Main struct {
	Config Config
	// Logger, when set before Run, is used instead of one built from
	// Config.Log.
	Logger *zap.Logger

	log   *zap.Logger
	rdb   redis.UniversalClient
	logic *logic.Server
	http  *http.Server
	ln    net.Listener
	done  chan struct{} // closed when Serve returns; nil until it runs

	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main holding the default configuration.
func NewMain() *Main { return &Main{Config: DefaultConfig()} }

// Run validates the configuration, opens the listener (so a port in use
// fails at once), connects to Redis and Kafka, creates the topic if needed
// and starts serving. It returns once the server runs; it serves until
// Close.
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
	if m.ln, err = net.Listen("tcp", c.Logic.Listen); err != nil {
		return fmt.Errorf("listen %s (logic.listen): %w", c.Logic.Listen, err)
	}
	// route.Dial lets per-request deadlines (logic.redis_timeout) reach the
	// socket, so a stalled Redis cannot hold requests for ReadTimeout.
	m.rdb = route.Dial(c.Redis)
	process.CheckRedis(ctx, m.rdb, c.Redis, log)
	reg := telemetry.NewRegistry()
	m.logic, err = logic.New(c.Logic, logic.Deps{Redis: m.rdb, Kafka: c.Kafka, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	if err := m.ensureTopic(ctx); err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/", m.logic.Handler())
	mux.Handle("/metrics", telemetry.Handler(reg))
	m.http = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: c.Logic.ReadHeaderTimeout,
		ReadTimeout:       c.Logic.ReadTimeout,
		// A request may wait for Redis and then Kafka; leave room for both.
		WriteTimeout: c.Logic.RedisTimeout + c.Logic.ProduceTimeout + 5*time.Second,
		IdleTimeout:  c.Logic.IdleTimeout,
		ErrorLog:     zap.NewStdLog(log.Named("http")),
	}
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		if err := m.http.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http serve", zap.Error(err))
		}
	}()
	log.Info("logic listening", zap.String("addr", m.ln.Addr().String()),
		zap.Strings("kafka", c.Kafka.Brokers), zap.String("topic", c.Kafka.Topic), zap.Strings("redis", c.Redis.Addrs))
	return nil
}

// ensureTopic creates the topic, waiting up to topicWait for Kafka.
func (m *Main) ensureTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	return m.logic.EnsureTopic(ctx)
}

// Addr is the address the server listens on (useful with port 0).
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// Close stops accepting, lets in-flight requests finish (up to
// logic.shutdown_timeout), then flushes the Kafka producer and closes
// Redis. Safe to call more than once and after a failed Run.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if m.done != nil {
			ctx, cancel := context.WithTimeout(context.Background(), m.Config.Logic.ShutdownTimeout)
			if err := m.http.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			}
			cancel()
			<-m.done
		} else if m.ln != nil {
			m.ln.Close() // Run failed after listening
		}
		if m.logic != nil {
			if err := m.logic.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close kafka writer: %w", err))
			}
		}
		if m.rdb != nil {
			m.rdb.Close()
		}
		if m.log != nil {
			m.log.Info("logic stopped")
			m.log.Sync()
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}
