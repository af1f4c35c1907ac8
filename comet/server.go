// Package comet is the WebSocket edge of the broadcast service. Browsers
// connect to its public listener (/ws) and join rooms, one or several per
// connection (Config.MaxRoomsPerConn; see rooms.go); job pushes batches of
// messages to its internal listener (/push); the comet fans each batch out to
// its local viewers of the room. Notices (to one user, or to everyone) come
// the same way and go to the user's local connections, found in an index
// by user id, or to every connection (notice.go). Each room of a connection
// is registered in Redis through package route, on its own, so job knows
// which comets hold a room, and the comet keeps a lease there so job stops
// pushing to it once it is gone.
//
// The wire protocol is described in docs/protocol.md.
//
// # Registry repair
//
// The registry keeps the routes it registered (held); Redis may lose them
// or keep routes the comet no longer holds (a restart without persistence,
// a failover, a register that landed after its unregister gave up). Each
// lease renewal is a route.Heartbeat: when the lease was lost, every held
// route is written again with route.RegisterAll (2,000 per call, one
// pipeline in flight); when only the count differs or a registry call
// failed since the last pass, and every ReconcileInterval whatever it saw,
// route.Reconcile makes Redis agree with held. Repairs
// run while no registry worker does, so they never interleave with the
// comet's own Register and Unregister calls. Start first removes the routes
// an earlier process with the same id left. /readyz fails while a
// re-registration is due or Redis did not answer the last renewal.
//
// # Memory per idle viewer
//
// A comet holds tens of thousands of mostly silent viewers, so an idle one
// is kept cheap: one parked reader goroutine on the minimum 2 KiB stack
// (wsframe.Conn lets it wait for the socket outside gorilla; frame handling
// runs on short-lived goroutines), a 256-byte read buffer, no write buffer
// (every frame is a PreparedMessage, other writes borrow from a pool), no
// writer goroutine (one exists only while the viewer's queue holds frames),
// and no timer (pings come from one sweep over the hub shards, which also
// closes a viewer silent for pong_wait). The HTTP handler returns right
// after the upgrade, so the server's request state and larger stack go
// away. Measure with the idle-load program (server and viewers in separate
// processes):
//
//	redis-server --port 6399 --save '' --daemonize yes
//	go run ./internal/tools/idleload -redis 127.0.0.1:6399 -n 1000,15000
package comet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/internal/telemetry"
)

// readBufferSize is the per-connection read buffer. Client frames are tiny
// (join, ping); it must hold a control frame (125 bytes + header). Larger
// frames are read through it in pieces.
const readBufferSize = 256

// writeBufferSize sizes the pooled buffers used for non-prepared writes;
// every frame this package writes is prepared, so idle viewers hold none.
const writeBufferSize = 4096

// Server is one comet: the public WebSocket listener, the internal push
// listener, the hub of local viewers and the registration in Redis.
type Server struct {
	cfg      Config
	id       string
	rt       Store
	log      *zap.Logger
	reg      *registry
	metrics  *metrics
	canary   *canaryWatch
	gatherer prometheus.Gatherer // what /metrics serves
	hub      *hub
	// owed are the viewers owed pongs for their heartbeats; the ping
	// sweep pays them at each tick (heartbeat.go).
	owed     pongsOwed
	joins    joinLines
	limiter  *ipLimiter
	sse      sseStreams // open SSE streams (sse.go)
	upgrader websocket.Upgrader
	verifier *auth.Verifier // nil: tokens are not checked (auth off, no keys)
	// send is the send path of send frames (send.go); nil: the comet
	// takes none.
	send        *sendpath.Path
	sendMetrics *sendMetrics
	authOn      bool // comet.auth jwt: every viewer shows a token
	connIDPfx   string
	seq         atomic.Uint64
	started     time.Time

	// Registry health, read by Ready and the metrics: a re-registration in
	// progress or due, whether the last lease renewal reached Redis, and
	// how many routes Redis listed for the comet then; held is the number
	// of routes the registry holds.
	held       atomic.Int64
	rebuilding atomic.Bool
	redisOK    atomic.Bool
	registered atomic.Int64
	// leased is set once takeOver succeeded: at Start, or at a later lease
	// renewal when Redis did not answer at Start.
	leased atomic.Bool

	public                 []publicRoute // mounted by HandlePublic
	publicLn, internalLn   net.Listener
	publicSrv, internalSrv *http.Server
	advertise              string

	// mu guards closing and readers.Add: shared by the checks and the
	// upgrades (a crowd of them at once must not queue on it), exclusive
	// for Shutdown setting closing.
	mu      sync.RWMutex
	closing bool
	readers sync.WaitGroup
	bg      sync.WaitGroup
	quit    chan struct{}
	// leaseDone is closed when the lease loop returned: no repair runs.
	leaseDone chan struct{}

	shutdownOnce sync.Once
	shutdownErr  error
}

// Deps are what a comet needs from outside; it owns none of them.
type Deps struct {
	// Store holds the viewers' routes and the comet's lease.
	Store Store
	// Log defaults to a no-op logger.
	Log *zap.Logger
	// Registerer receives the metrics; nil means a private registry. The
	// internal listener's /metrics serves it when it is also a
	// prometheus.Gatherer (a *prometheus.Registry is), else the comet's
	// own metrics.
	Registerer prometheus.Registerer
	// Verifier checks viewers' tokens; required when Config.Auth is jwt.
	// With auth off it is optional: given, a viewer may prove its uid with
	// a token and so receive the user's notices.
	Verifier *auth.Verifier
	// Send, when set, is the send path the viewers' send frames go
	// through (send.go); the comet counts them under its own metrics and
	// does not close it. nil: the comet takes no sends.
	Send *sendpath.Path
}

// New returns a comet for cfg, which the caller has validated (the binaries
// do it once, with section-prefixed errors, before building any role). It
// does no network I/O; Start does.
func New(cfg Config, d Deps) (*Server, error) {
	if d.Store == nil {
		return nil, errors.New("comet: Deps.Store is nil")
	}
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	reg, gatherer := telemetry.Metrics(d.Registerer)
	var rnd [6]byte
	rand.Read(rnd[:])
	s := &Server{
		cfg:       cfg,
		rt:        d.Store,
		log:       log,
		gatherer:  gatherer,
		hub:       newHub(cfg),
		limiter:   newIPLimiter(cfg.MaxConnsPerIP, cfg.IPv6Prefix),
		verifier:  d.Verifier,
		authOn:    cfg.Auth == config.AuthJWT,
		connIDPfx: "c-" + hex.EncodeToString(rnd[:]) + "-",
		quit:      make(chan struct{}),
		leaseDone: make(chan struct{}),
	}
	if s.authOn && d.Verifier == nil {
		return nil, errors.New("comet: comet.auth is jwt but Deps.Verifier is nil")
	}
	s.metrics = newMetrics(reg, s.hub, s.registryCounts)
	if d.Send != nil {
		s.sendMetrics = newSendMetrics(reg)
		s.send = d.Send.WithMetrics(s.sendMetrics)
	}
	s.canary = newCanaryWatch(reg, cfg.CanaryMaxAge)
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout:  cfg.WriteWait,
		ReadBufferSize:    readBufferSize,
		WriteBufferSize:   writeBufferSize,
		WriteBufferPool:   &sync.Pool{},
		EnableCompression: cfg.Compression,
		// The origin is checked before Upgrade, with a JSON answer.
		CheckOrigin: func(*http.Request) bool { return true },
		Error:       handshakeError,
	}
	return s, nil
}

// ID returns the comet id used in Redis.
func (s *Server) ID() string { return s.id }

// PublicAddr returns the address of the public listener once started.
func (s *Server) PublicAddr() string { return s.publicLn.Addr().String() }

// InternalAddr returns the address of the internal listener once started.
func (s *Server) InternalAddr() string { return s.internalLn.Addr().String() }

// AdvertiseAddr returns the push address published in the lease.
func (s *Server) AdvertiseAddr() string { return s.advertise }

// PublicHandler serves /ws, /sse, /healthz, /readyz and what HandlePublic
// mounted, for embedding in another server.
func (s *Server) PublicHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", s.serveWS)
	mux.HandleFunc("/sse", s.serveSSE)
	mux.HandleFunc("/healthz", healthz(s.isClosing))
	mux.HandleFunc("/readyz", readyz(s.Ready))
	root := false
	for _, p := range s.public {
		mux.Handle(p.pattern, p.h)
		root = root || p.pattern == "/"
	}
	if !root {
		mux.HandleFunc("/", notFound)
	}
	return mux
}

// InternalHandler serves /push, /metrics, /healthz and /readyz.
func (s *Server) InternalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(push.Path, s.servePush)
	mux.Handle("/metrics", telemetry.Handler(s.gatherer))
	mux.HandleFunc("/healthz", healthz(s.isClosing))
	mux.HandleFunc("/readyz", readyz(s.Ready))
	mux.HandleFunc("/", notFound)
	return mux
}

// Start listens on both addresses, removes the routes an earlier process
// with the same id left behind, takes the lease and serves in the
// background; it returns once both listeners are open. It fails when a
// listener cannot be opened. When Redis does not answer it serves anyway,
// not ready (/readyz 503), and takes over at the first lease renewal that
// reaches Redis.
func (s *Server) Start(ctx context.Context) error {
	if err := s.listen(); err != nil {
		return err
	}
	s.started = time.Now()
	s.reg = newRegistry(s.rt, s.id, s.cfg.RedisTimeout, s.cfg.RegistryWorkers, s.log, s.metrics, &s.held)
	if err := s.takeOver(ctx); err != nil {
		// Serve anyway: /healthz answers, /readyz says 503 until Redis
		// does, and the lease loop takes the lease then.
		s.log.Warn("redis does not answer; serving, not ready until it does", zap.Error(err))
	}
	s.publicSrv, s.internalSrv = s.httpServers()
	s.publicSrv.RegisterOnShutdown(s.EndStreams)
	s.bg.Add(6)
	go s.serve(s.publicSrv, s.publicLn, "public")
	go s.serve(s.internalSrv, s.internalLn, "internal")
	go s.leaseLoop()
	go s.pingLoop()
	go s.onlineLoop()
	go s.checkLoop()
	s.log.Info("comet started", zap.String("id", s.id), zap.String("public", s.PublicAddr()),
		zap.String("internal", s.InternalAddr()), zap.String("advertise", s.advertise))
	return nil
}

// viewerListenConfig is how the public listener accepts viewers: the
// kernel's TCP keepalive probes a connection only after PongWait +
// PingPeriod without a segment, the longest a live viewer is kept without
// a sign of life. Go's default (a probe after 15 s idle, every 15 s)
// probed every idle viewer between two pings, a timer and two segments
// per viewer and period on top of the ping and its pong, which already
// tell the comet (pingLoop) and any proxy between that the viewer is
// there; the probe now stays a backstop for a connection the pings cannot
// settle.
func (s *Server) viewerListenConfig() *net.ListenConfig {
	return &net.ListenConfig{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: s.cfg.PongWait + s.cfg.PingPeriod, Interval: 15 * time.Second, Count: 4}}
}

// listen opens both listeners and settles the comet's id and advertised
// push address, which may depend on the internal listener's port.
func (s *Server) listen() error {
	var err error
	if s.internalLn, err = net.Listen("tcp", s.cfg.InternalListen); err != nil {
		return fmt.Errorf("listen internal: %w", err)
	}
	if s.publicLn, err = s.viewerListenConfig().Listen(context.Background(), "tcp", s.cfg.Listen); err != nil {
		s.internalLn.Close()
		return fmt.Errorf("listen public: %w", err)
	}
	s.advertise = advertiseAddr(s.cfg.Advertise, s.internalLn.Addr().String())
	s.id = s.cfg.ID
	if s.id == "" {
		s.id = defaultID(s.internalLn.Addr().String())
	}
	return nil
}

// httpServers builds the public server (long-lived WebSocket connections,
// so no read or write timeout) and the internal one (pushes and scrapes).
func (s *Server) httpServers() (public, internal *http.Server) {
	public = &http.Server{
		Handler:           s.PublicHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          zap.NewStdLog(s.log),
	}
	internal = &http.Server{
		Handler:           s.InternalHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          zap.NewStdLog(s.log),
	}
	return public, internal
}

func (s *Server) serve(srv *http.Server, ln net.Listener, name string) {
	defer s.bg.Done()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("listener failed", zap.String("listener", name), zap.Error(err))
	}
}

// advertiseAddr returns configured, or the listener address with a
// reachable host: the host name for an unspecified address.
func advertiseAddr(configured, listen string) string {
	if configured != "" {
		return configured
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port)
}

// defaultID derives a comet id from the host name and the internal port,
// so two comets on one host differ.
func defaultID(listen string) string {
	h, _ := os.Hostname()
	var b strings.Builder
	for i := 0; i < len(h) && b.Len() < 48; i++ {
		c := h[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b.WriteByte(c)
		}
	}
	if b.Len() == 0 {
		b.WriteString("comet")
	}
	if _, port, err := net.SplitHostPort(listen); err == nil {
		b.WriteString("-" + port)
	}
	return b.String()
}

func (s *Server) isClosing() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closing
}

// pingLoop pings every viewer once per PingPeriod, but for those that sent
// a heartbeat of their own within it (conn.pingDue), and closes the viewers
// silent for PongWait (so one is closed between PongWait and PongWait +
// PingPeriod after it went quiet). It sweeps one hub shard per tick, so
// pings are spread over the period and no per-connection timer or read
// deadline exists; see conn.ping for how the ping is written. Each tick
// also writes the pongs owed for client heartbeats (pongsOwed).
func (s *Server) pingLoop() {
	defer s.bg.Done()
	t := time.NewTicker(max(s.cfg.PingPeriod/numShards, time.Millisecond))
	defer t.Stop()
	var buf []*conn
	next := 0
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			s.owed.pay()
			now := time.Now()
			buf = s.hub.forEachConn(next, buf, func(c *conn) {
				if c.silent(now) {
					c.ws.Close() // the reader sees it and cleans up
					return
				}
				if c.pingDue(now) {
					c.ping()
				}
			})
			next = (next + 1) % numShards
		}
	}
}

// Shutdown stops the comet gracefully: it stops accepting viewers, closes
// every viewer with 1001 (going away) so it reconnects elsewhere, waits for
// pending registry calls, removes this comet's routes and lease from Redis
// and stops the internal listener. ctx and Config.ShutdownTimeout bound
// the wait for viewers and listeners; the Redis cleanup after it has its
// own bound (leaveRedis). It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	if s.publicSrv == nil {
		return nil // never started
	}
	s.publicSrv.Shutdown(ctx)
	close(s.quit)
	s.closeViewers(ctx)
	// No reader is left to submit registry work; finish what is queued and
	// any repair so no registration lands after the comet's routes were
	// removed.
	s.reg.stop()
	<-s.leaseDone
	if s.leased.Load() {
		// A Redis that does not answer now cannot fail the shutdown: the
		// lease expires by itself and job's janitor removes the routes.
		if err := s.leaveRedis(ctx); err != nil {
			s.log.Warn("routes and lease left in Redis; the lease expires and job's janitor removes them", zap.Error(err))
		}
	}
	if err := s.internalSrv.Shutdown(ctx); err != nil {
		s.internalSrv.Close()
	}
	s.bg.Wait()
	s.log.Info("comet stopped", zap.String("id", s.id))
	return nil
}

// closeViewers closes every viewer with 1001 and waits for their readers
// to finish; once ctx ends, viewers that did not answer the close are cut
// off.
func (s *Server) closeViewers(ctx context.Context) {
	for i := range numShards {
		s.hub.forEachConn(i, nil, func(c *conn) { c.kill(websocket.CloseGoingAway, "server shutting down") })
	}
	readersDone := make(chan struct{})
	go func() { s.readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-ctx.Done():
		for i := range numShards {
			s.hub.forEachConn(i, nil, func(c *conn) { c.ws.Close() })
		}
		<-readersDone
	}
}

// leaveRedis removes this comet's routes and lease. It gets two Redis
// timeouts of its own even when ctx has ended, so a slow shutdown does not
// leave routes behind that job would push to.
func (s *Server) leaveRedis(ctx context.Context) error {
	var errs []error
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*s.cfg.RedisTimeout)
	defer cancel()
	if n, err := s.rt.RemoveComet(rctx, s.id); err != nil {
		errs = append(errs, fmt.Errorf("remove routes: %w", err))
	} else {
		s.log.Info("routes removed", zap.Int("connections", n))
	}
	if err := s.rt.ReleaseLease(rctx, s.id); err != nil {
		errs = append(errs, fmt.Errorf("release lease: %w", err))
	}
	return errors.Join(errs...)
}
