// Command danmaku runs the whole service in one process for development and
// demos: logic, job and comet share one Redis client and one metrics
// registry, and one HTTP port serves the demo page (/), the client library
// (/danmaku.js), the WebSocket endpoint (/ws), the API (/logic/*), /metrics,
// /healthz and /readyz, so a browser needs no CORS.
//
// With kafka.brokers empty it starts an embedded Kafka-protocol broker
// (franz-go kfake); with redis.addrs empty an embedded Redis (miniredis).
// Both live in memory and are gone when the process ends. Setting either
// list points the binary at the real thing.
//
// Configuration: configs/danmaku.yaml (-config), DANMAKU_* variables and
// -<section>.<key> flags; -help lists every knob.
//
// Its verbs help to run the role binaries (see cli.go): "danmaku token"
// mints a JWT, "danmaku config init DIR" writes the roles' files with
// fresh matching secrets, "danmaku config check FILE" validates a file as
// its role would.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku/archive"
	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/process"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/job"
	"github.com/danmaku/danmaku/logic"
	"github.com/danmaku/danmaku/route"
	"github.com/danmaku/danmaku/vodstore"
	"github.com/danmaku/danmaku/web"
)

func main() {
	if code, ok := runVerb(os.Args[1:], os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	if help(os.Args[1:], os.Environ(), os.Stderr) {
		return
	}
	m := NewMain()
	process.Main("danmaku", &m.Config, m)
}

// Config is the whole configuration of the all-in-one binary. logic.listen
// is the one public port; comet.listen and comet.internal_listen stay on
// loopback; job.metrics_addr is not used (metrics are on the public port).
type Config struct {
	Log   config.Log   `yaml:"log"`
	Redis config.Redis `yaml:"redis"`
	Kafka config.Kafka `yaml:"kafka"`
	Auth  auth.Section `yaml:"auth"`
	Logic logic.Config `yaml:"logic"`
	Job   job.Config   `yaml:"job"`
	Comet comet.Config `yaml:"comet"`
	// Archive runs inside the all-in-one too; its metrics are on the
	// public port and logic's VOD API reads its database.
	Archive archive.Config `yaml:"archive"`
}

// DefaultConfig returns the defaults: the roles' own, except that Redis and
// Kafka are embedded, logs are human-readable, the coalescing window is
// short enough to feel live, and every listener is on loopback.
func DefaultConfig() Config {
	c := Config{
		Log:     config.DefaultLog(),
		Redis:   config.DefaultRedis(),
		Kafka:   config.DefaultKafka(),
		Logic:   logic.DefaultConfig(),
		Job:     job.DefaultConfig(),
		Comet:   comet.DefaultConfig(),
		Archive: archive.DefaultConfig(),
	}
	c.Log.Format = "console"
	// Like the embedded Redis and Kafka, the archive's database lives as
	// long as the process unless archive.dsn names one.
	c.Archive.DSN = ""
	c.Archive.MetricsAddr = ""
	// The all-in-one runs with auth off and /metrics public: other hosts
	// reach it only when the operator says so (-logic.listen=:8090).
	c.Logic.Listen = "127.0.0.1:8090"
	c.Redis.Addrs = nil
	c.Kafka.Brokers = nil
	c.Kafka.Partitions = 4
	c.Job.Window = 200 * time.Millisecond
	c.Job.MetricsAddr = ""
	c.Comet.Listen = "127.0.0.1:0"
	c.Comet.InternalListen = "127.0.0.1:0"
	c.Comet.OnlinePeriod = 2 * time.Second
	return c
}

// Validate checks what the binary needs beyond its sections' own rules:
// the auth section when a door has auth on (empty Redis and Kafka
// addresses start embedded ones).
func (c *Config) Validate() error {
	if c.authOn() {
		return c.Auth.Require()
	}
	return nil
}

func (c *Config) authOn() bool {
	return c.Logic.Auth == config.AuthJWT || c.Comet.Auth == config.AuthJWT
}

// topicWait is how long start-up keeps trying to reach Kafka to create the
// topic: long enough for a broker started at the same time to come up.
const topicWait = 30 * time.Second

// jobShutdownSlack is what Close allows the job beyond its drain: the last
// commit and leaving the consumer group.
const jobShutdownSlack = 10 * time.Second

// Main is the all-in-one process: Run starts it, Close stops it.
type Main struct {
	Config Config
	// Logger, when set before Run, is used instead of one built from
	// Config.Log.
	Logger *zap.Logger

	log      *zap.Logger
	verifier *auth.Verifier // nil: both doors have auth off
	// devSecret: the auth secret was made at start (devAuth), so the
	// development token endpoint is served.
	devSecret bool
	emb       embedded
	rdb       redis.UniversalClient
	comet     *comet.Server
	logic     *logic.Server
	job       *job.Job
	arc       *archive.Archive
	vod       vodstore.Store
	vodDir    string // the temporary archive database's directory
	pusher    *push.Client
	http      *http.Server
	ln        net.Listener

	served chan struct{} // closed when Serve returns

	admin       *http.Server // logic.admin_addr, when set
	adminLn     net.Listener
	adminServed chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main holding the default configuration.
func NewMain() *Main {
	return &Main{Config: DefaultConfig()}
}

// Done is closed when the job stopped by itself (see job.Job.Done); nil
// before Run.
func (m *Main) Done() <-chan struct{} {
	if m.job == nil {
		return nil
	}
	return m.job.Done()
}

// Addr is the address of the public listener (useful with port 0).
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// URL is the demo page's address, with a host a browser can open.
func (m *Main) URL() string {
	if m.ln == nil {
		return ""
	}
	host, port, _ := net.SplitHostPort(m.Addr())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// Run starts the embedded Redis and Kafka when none is configured, then
// comet, logic and job, then the public listener. It returns once
// everything serves; the process runs until Close.
func (m *Main) Run(ctx context.Context) error {
	c := &m.Config
	// One process: the job pushes to its own comet over loopback, so the
	// secret is one value. The placeholder default becomes a random value
	// per process, which keeps the push endpoint closed to other local users.
	if c.Comet.Secret == "" || c.Comet.Secret == config.PlaceholderSecret {
		var b [16]byte
		rand.Read(b[:])
		c.Comet.Secret = hex.EncodeToString(b[:])
	}
	c.Job.PushSecret = c.Comet.Secret
	m.devSecret = m.devAuth()
	if err := config.Validate(c); err != nil {
		return err
	}
	log, err := process.Logger(m.Logger, c.Log)
	if err != nil {
		return err
	}
	m.log = log
	if m.verifier, err = m.authVerifier(m.devSecret); err != nil {
		return err
	}

	if len(c.Redis.Addrs) == 0 {
		addr, err := m.emb.startRedis()
		if err != nil {
			return err
		}
		c.Redis.Addrs = []string{addr}
		log.Info("using an embedded in-memory Redis (data is lost on exit); for a real one set redis.addrs "+
			"(DANMAKU_REDIS_ADDRS=host:6379 or -redis.addrs=host:6379)", zap.String("addr", addr))
	} else {
		log.Info("using Redis", zap.Strings("addrs", c.Redis.Addrs))
	}
	if len(c.Kafka.Brokers) == 0 {
		addr, err := m.emb.startKafka()
		if err != nil {
			return err
		}
		c.Kafka.Brokers = []string{addr}
		log.Info("using an embedded Kafka-protocol broker (data is lost on exit); for a real one set kafka.brokers "+
			"(DANMAKU_KAFKA_BROKERS=host:9092 or -kafka.brokers=host:9092)", zap.String("addr", addr))
	} else {
		log.Info("using Kafka", zap.Strings("brokers", c.Kafka.Brokers), zap.String("topic", c.Kafka.Topic))
	}

	reg := telemetry.NewRegistry()
	m.rdb = route.Dial(c.Redis)
	store := route.New(m.rdb)

	process.CheckRedis(ctx, m.rdb, c.Redis, log)
	if err := m.openArchive(ctx); err != nil {
		return err
	}
	m.logic, err = logic.New(c.Logic, logic.Deps{Store: store, Log: log.Named("logic"), Registerer: reg,
		Kafka: c.Kafka, Verifier: m.verifier, VOD: m.vod, Console: web.Console()})
	if err != nil {
		return err
	}
	// The viewers' sends over their sockets go through logic's send path:
	// the same checks, batches and producer as POST /logic/send.
	m.comet, err = comet.New(c.Comet, comet.Deps{Store: store, Log: log.Named("comet"), Registerer: reg, Verifier: m.verifier,
		Send: m.logic.SendPath()})
	if err != nil {
		return err
	}
	if err := m.comet.Start(ctx); err != nil {
		m.comet = nil
		return fmt.Errorf("start comet: %w", err)
	}
	if err := m.ensureTopic(ctx); err != nil {
		return err
	}
	m.logic.StartCanaries(ctx) // off with logic.canary_interval 0, as in the role binaries

	m.pusher = push.NewClient(c.Job.PushSecret, c.Job.PushTimeout)
	m.job, err = job.New(c.Job, job.Deps{Kafka: c.Kafka, Store: store, Pusher: m.pusher,
		Log: log.Named("job"), Registerer: reg})
	if err != nil {
		return err
	}
	if err := m.job.Start(ctx); err != nil {
		return err
	}
	m.arc, err = archive.New(c.Archive, archive.Deps{Kafka: c.Kafka, Store: m.vod, Log: log.Named("archive"), Registerer: reg})
	if err != nil {
		return err
	}
	if err := m.arc.Start(ctx); err != nil {
		return err
	}

	m.ln, err = net.Listen("tcp", c.Logic.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.Logic.Listen, err)
	}
	m.http = &http.Server{
		Handler:           m.handler(reg),
		ReadHeaderTimeout: c.Logic.ReadHeaderTimeout,
		IdleTimeout:       c.Logic.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	m.http.RegisterOnShutdown(m.comet.EndStreams) // SSE streams are requests Shutdown would wait for
	m.served = serve(m.http, m.ln, log)
	if err := m.startAdmin(reg); err != nil {
		return err
	}
	log.Info("danmaku is running: open "+m.URL()+" in a browser",
		zap.String("addr", m.Addr()), zap.Duration("window", c.Job.Window))
	return nil
}

// openArchive opens (and migrates) the archive's database: archive.dsn,
// or a temporary SQLite file when it is empty.
func (m *Main) openArchive(ctx context.Context) error {
	c := &m.Config
	dsn := c.Archive.DSN
	if dsn == "" {
		dir, err := os.MkdirTemp("", "danmaku-archive-")
		if err != nil {
			return err
		}
		m.vodDir = dir
		dsn = "sqlite:" + filepath.Join(dir, "archive.db")
		m.log.Info("using a temporary archive database (removed at exit); for a lasting one set archive.dsn", zap.String("dsn", dsn))
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	if m.vod, err = vodstore.Open(octx, dsn); err != nil {
		return err
	}
	if c.Archive.Migrate {
		return m.vod.Migrate(octx)
	}
	return nil
}

// handler routes the one public port. The server has no read or write
// timeout because /ws connections live long; API requests get theirs per
// request instead.
func (m *Main) handler(reg *prometheus.Registry) http.Handler {
	c := m.Config.Logic
	api := m.logic.Handler()
	bounded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		rc.SetReadDeadline(now.Add(c.ReadTimeout))
		// A send may wait for Redis and then Kafka; leave room for both.
		rc.SetWriteDeadline(now.Add(c.RedisTimeout + c.ProduceTimeout + 5*time.Second))
		api.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("/logic/", bounded)
	mux.Handle("/healthz", bounded)
	mux.Handle("/readyz", bounded)
	if m.logic.AdminHandler() == nil {
		mux.Handle(web.ConsolePath, bounded) // else on logic.admin_addr, next to the admin API
	}
	mux.Handle("/ws", m.comet.PublicHandler())
	mux.Handle("/sse", m.comet.PublicHandler())
	if m.logic.AdminHandler() == nil {
		mux.Handle("/metrics", telemetry.Handler(reg))
	}
	page := web.Config{}
	if m.verifier != nil && m.devSecret {
		mux.Handle(devTokenPath, m.devTokenHandler())
		page.DevToken = devTokenPath
	}
	mux.Handle("/", web.Handler(page))
	return mux
}

// serve runs srv on ln in the background; the channel is closed when it
// stopped.
func serve(srv *http.Server, ln net.Listener, log *zap.Logger) chan struct{} {
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http serve", zap.Error(err))
		}
	}()
	return served
}

// startAdmin serves logic's admin API, the notices and /metrics on
// logic.admin_addr when it is set (the public port then has none of them).
func (m *Main) startAdmin(reg *prometheus.Registry) error {
	h := m.logic.AdminHandler()
	if h == nil {
		return nil
	}
	c := m.Config.Logic
	ln, err := net.Listen("tcp", c.AdminAddr)
	if err != nil {
		return fmt.Errorf("listen %s (logic.admin_addr): %w", c.AdminAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("/metrics", telemetry.Handler(reg))
	m.adminLn = ln
	m.admin = &http.Server{Handler: mux, ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout,
		WriteTimeout: c.WriteTimeout(), IdleTimeout: c.IdleTimeout, ErrorLog: zap.NewStdLog(m.log.Named("http"))}
	m.adminServed = serve(m.admin, ln, m.log)
	m.log.Info("admin API and /metrics listening", zap.String("addr", ln.Addr().String()))
	return nil
}

// AdminAddr is the address of the admin listener (logic.admin_addr);
// empty without one.
func (m *Main) AdminAddr() string {
	if m.adminLn == nil {
		return ""
	}
	return m.adminLn.Addr().String()
}

// ensureTopic creates the topic, waiting up to topicWait for Kafka.
func (m *Main) ensureTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	return m.logic.EnsureTopic(ctx)
}

// stopHTTP shuts srv down within logic.shutdown_timeout and waits until
// its Serve returned (served closed); nil srv: never started.
func (m *Main) stopHTTP(srv *http.Server, served chan struct{}, what string) error {
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.Config.Logic.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	<-served
	if err != nil {
		return fmt.Errorf("%s shutdown: %w", what, err)
	}
	return nil
}

// Close shuts down in dependency order: stop taking requests, flush the
// producer, let the job deliver what it buffered (the comet is still up to
// take it), close viewers with 1001 and remove routes, then close the
// clients and the embedded servers. Safe to call twice and after a failed
// Run.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		errs = append(errs, m.stopHTTP(m.http, m.served, "http"), m.stopHTTP(m.admin, m.adminServed, "admin http"))
		if m.logic != nil {
			errs = append(errs, m.logic.Shutdown(context.Background()))
		}
		if m.job != nil {
			ctx, cancel := context.WithTimeout(context.Background(), m.Config.Job.DrainTimeout+jobShutdownSlack)
			errs = append(errs, m.job.Shutdown(ctx))
			cancel()
		}
		if m.arc != nil {
			ctx, cancel := context.WithTimeout(context.Background(), m.Config.Archive.WriteTimeout+jobShutdownSlack)
			errs = append(errs, m.arc.Shutdown(ctx))
			cancel()
		}
		if m.vod != nil {
			errs = append(errs, m.vod.Close())
		}
		if m.vodDir != "" {
			os.RemoveAll(m.vodDir)
		}
		if m.pusher != nil {
			m.pusher.Close()
		}
		if m.comet != nil {
			errs = append(errs, m.comet.Shutdown(context.Background()))
		}
		if m.rdb != nil {
			m.rdb.Close()
		}
		m.emb.stop()
		if m.log != nil {
			m.log.Info("danmaku stopped")
			m.log.Sync()
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}
