package logic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/internal/wordfilter"
)

// Deps are what a Server needs from outside. The Server owns the Kafka
// producer it builds from Kafka; it does not own the Store.
type Deps struct {
	// Store backs the rate limiter and the online count. Build its client
	// with route.Dial (ContextTimeoutEnabled) so a stalled Redis cannot hold
	// a request past Config.RedisTimeout.
	Store Store
	// Log defaults to a no-op logger.
	Log *zap.Logger
	// Registerer receives the metrics; nil means a private registry. The
	// /metrics Start serves is the Registerer when it is also a
	// prometheus.Gatherer (a *prometheus.Registry is), else logic's own
	// metrics.
	Registerer prometheus.Registerer
	// Kafka names the brokers and the room topic the producer writes to;
	// Config holds the producer's batching and timeouts.
	Kafka config.Kafka
	// Verifier checks senders' tokens; required when Config.Auth is jwt.
	// A binary builds one from its auth section and may share it with its
	// comet.
	Verifier *auth.Verifier
	// VOD is the archive's database the VOD API reads; nil turns the API
	// off (404).
	VOD VODStore
	// Console is the moderator console's page (web.Console), served at
	// /admin/ next to the admin API (on Config.AdminAddr when set); nil:
	// no console.
	Console http.Handler
}

// Server is the logic HTTP API. Create it with New; either Start it on
// Config.Listen or mount Handler in another server; call Shutdown when
// done.
type Server struct {
	cfg      Config
	kafka    config.Kafka
	verifier *auth.Verifier // nil: auth off
	vod      *vod
	words    *wordfilter.Filter
	proxies  proxies
	// historyLimit bounds GET /logic/history per client address.
	historyLimit *readLimiter
	store        Store
	send         *sendpath.Path
	producer     *kafkax.Producer
	canaries     *canaries
	ids          *sendpath.IDGen
	log          *zap.Logger
	m            *metrics
	gatherer     prometheus.Gatherer // what Start serves on /metrics
	mux          *http.ServeMux      // the public API
	adminMux     *http.ServeMux      // admin API and notices: mux unless Config.AdminAddr is set

	pub, adm listener // set by Start; adm only with Config.AdminAddr
	// stopTopic ends Start's background EnsureTopic and the canaries that
	// follow it (or those of StartCanaries); topicDone is closed when they
	// returned.
	stopTopic context.CancelFunc
	topicDone chan struct{}

	shutdownOnce sync.Once
	shutdownErr  error
}

// New builds a Server for cfg, which the caller has validated (the binaries
// do it once, with section-prefixed errors, before building any role). It
// does no network I/O: the producer connects on first use, and EnsureTopic
// creates the topic when asked to.
func New(cfg Config, d Deps) (*Server, error) {
	if err := checkDeps(cfg, &d); err != nil {
		return nil, err
	}
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	words, err := wordfilter.New(cfg.BlockedWords)
	if err != nil {
		return nil, fmt.Errorf("logic.blocked_words: %w", err)
	}
	pxs, err := parseProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	reg, gatherer := telemetry.Metrics(d.Registerer)
	s := &Server{
		cfg:          cfg,
		kafka:        d.Kafka,
		words:        words,
		proxies:      pxs,
		historyLimit: newReadLimiter(cfg.HistoryRateLimit, cfg.HistoryRateBurst),
		store:        d.Store,
		producer:     kafkax.NewProducer(d.Kafka.Brokers, d.Kafka.Topic, cfg.ProducerConfig()),
		ids:          sendpath.NewIDGen(cfg.NodeID),
		log:          log,
		m:            newMetrics(reg),
		gatherer:     gatherer,
		mux:          http.NewServeMux(),
	}
	s.send = sendpath.New(cfg.Config, sendpath.Deps{
		Store: d.Store, Producer: s.producer, IDs: s.ids, Words: words, Metrics: s.m, Log: log,
	})
	s.vod = newVOD(cfg, d.VOD, reg)
	s.canaries = newCanaries(s, reg)
	s.adminMux = s.mux
	if cfg.AdminAddr != "" {
		s.adminMux = http.NewServeMux()
	}
	if cfg.authOn() {
		s.verifier = d.Verifier
		log.Info("senders authenticate with JWTs", zap.Strings("algorithms", d.Verifier.Algorithms()))
	} else {
		log.Warn("logic.auth is off: senders are not authenticated, /logic/send trusts the userId and userName of the body; set logic.auth=jwt to require tokens")
	}
	s.routes()
	if d.Console != nil {
		s.handleOn(s.adminMux, "/admin/", "console", d.Console.ServeHTTP)
	}
	return s, nil
}

// routes registers every endpoint on the public mux and, with
// Config.AdminAddr, the admin ones on the admin mux.
func (s *Server) routes() {
	s.handle("/logic/send", "send", s.serveSend)
	s.handle("/logic/online", "online", s.serveOnline)
	s.handle("/logic/history", "history", s.serveHistory)
	s.handleVOD()
	s.handle("/logic/room", "room", s.serveRoom)
	s.handleAdmin()
	s.handleNotices()
	s.handle("/healthz", "healthz", s.serveHealthz)
	s.handle("/readyz", "readyz", s.serveReadyz)
	s.handle("/", "other", serveNotFound)
	if s.adminMux != s.mux {
		s.handleOn(s.adminMux, "/healthz", "healthz", s.serveHealthz)
		s.handleOn(s.adminMux, "/", "other", serveNotFound)
	}
}

// checkDeps checks that d has what a Server of cfg needs.
func checkDeps(cfg Config, d *Deps) error {
	if d.Store == nil {
		return errors.New("logic: Deps.Store is nil")
	}
	if len(d.Kafka.Brokers) == 0 {
		return errors.New("logic: Deps.Kafka has no brokers")
	}
	if err := config.Validate(&d.Kafka); err != nil {
		return fmt.Errorf("logic: Deps.Kafka: %w", err)
	}
	if cfg.authOn() && d.Verifier == nil {
		return errors.New("logic: logic.auth is jwt but Deps.Verifier is nil")
	}
	return nil
}

// SendPath is the send path the server's sends go through, for another
// door of the same process (the all-in-one's comet); the server closes it
// on Shutdown.
func (s *Server) SendPath() *sendpath.Path { return s.send }

// Handler serves the public API (/logic/send, /logic/online,
// /logic/history), /healthz and /readyz, with CORS for
// Config.AllowedOrigins, and the admin API and notices unless
// Config.AdminAddr moves them to AdminHandler. An all-in-one binary may
// mount it for "/logic/" only and use Ready for its own readiness check.
func (s *Server) Handler() http.Handler { return s.withCORS(s.mux) }

// AdminHandler serves the admin API (/logic/admin/*), the notices
// (/logic/push/user, /logic/broadcast) and /healthz when Config.AdminAddr
// is set; nil otherwise (Handler serves them).
func (s *Server) AdminHandler() http.Handler {
	if s.adminMux == s.mux {
		return nil
	}
	return s.adminMux
}

// EnsureTopic creates the room topic with the configured partitions when
// it is missing and Config.CreateTopic is set, retrying every second until
// ctx ends while Kafka is unreachable.
func (s *Server) EnsureTopic(ctx context.Context) error {
	if !s.cfg.CreateTopic {
		return nil
	}
	created, err := kafkax.EnsureTopicWait(ctx, s.kafka.Brokers, kafkax.Topic{
		Name: s.kafka.Topic, Partitions: s.kafka.Partitions, Replication: s.kafka.Replication,
	}, func(err error) { s.log.Warn("kafka topic not ready, retrying", zap.Error(err)) })
	if err != nil {
		return fmt.Errorf("kafka topic %s: %w", s.kafka.Topic, err)
	}
	if created {
		s.log.Info("created kafka topic", zap.String("topic", s.kafka.Topic), zap.Int("partitions", s.kafka.Partitions))
	}
	return nil
}

// Ready reports whether Redis answers and Kafka answers with the room
// topic present, both within ctx.
func (s *Server) Ready(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return danmaku.Unavailable("redis unreachable", err)
	}
	if err := kafkax.Ping(ctx, s.kafka.Brokers, s.kafka.Topic); err != nil {
		return danmaku.Unavailable("kafka unreachable", err)
	}
	return nil
}

func serveNotFound(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, danmaku.Errorf(danmaku.ENOTFOUND, "path", "no endpoint %s", r.URL.Path))
}

// handle registers fn under path of the public API.
func (s *Server) handle(path, name string, fn func(w http.ResponseWriter, r *http.Request)) {
	s.handleOn(s.mux, path, name, fn)
}

// handleOn registers fn under path of mux and counts its answers by
// status code.
func (s *Server) handleOn(mux *http.ServeMux, path, name string, fn func(w http.ResponseWriter, r *http.Request)) {
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		s.m.inFlight.Inc()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		fn(sw, r)
		s.m.inFlight.Dec()
		s.m.observeRequest(name, sw.code)
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", method)
	httpx.WriteError(w, danmaku.Errorf(danmaku.CodeMethod, "method", "%s not allowed, use %s", r.Method, method))
	return false
}

// serveSend is POST /logic/send: authenticate (auth on), decode, check
// (sendpath.Path.Check: claims, validation, blocked words, room modes,
// bans, mutes, rate limits), stamp, produce, and answer 202 only once Kafka
// acknowledged every message.
func (s *Server) serveSend(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	claims, err := s.authenticate(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	req, err := decodeSend(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	c, retry, err := s.send.Check(r.Context(), claims, s.proxies.clientIP(r), &req)
	if err != nil {
		writeRetry(w, retry, err)
		return
	}
	s.accept(w, r, &req, c)
}

// accept produces req's messages and answers 202 with their ids once
// Kafka acknowledged them, or answers the error and returns it.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, req *SendRequest, c sendpath.Checked) error {
	ids := c.IDs
	if err := s.send.Produce(r.Context(), req, c); err != nil {
		httpx.WriteError(w, err)
		return err
	}
	held := c.Held()
	s.m.observeAccepted(len(ids)-len(held), req.Priority)
	s.m.observeReview("held", len(held))
	httpx.WriteJSON(w, http.StatusAccepted, SendResponse{MsgIDs: ids, Held: held})
	return nil
}

// writeRetry answers err, with a Retry-After of retry seconds when it is
// positive.
func writeRetry(w http.ResponseWriter, retry int64, err error) {
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	}
	httpx.WriteError(w, err)
}

// write produces values as records with key and time ts and returns once
// Kafka acknowledged every one, or failed, within Config.ProduceTimeout;
// the time taken is observed. The records of one write stay together, in
// order, in the key's partition.
func (s *Server) write(ctx context.Context, key []byte, ts time.Time, values ...[]byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	err := s.producer.Write(ctx, key, ts, values...)
	s.m.observeProduce(time.Since(start), err)
	return err
}

func (s *Server) redisError(op string, err error) error { return sendpath.RedisError(s.log, op, err) }

// serveOnline is GET /logic/online?roomId=: the room's viewer count, guarded
// like a send (authorizeRead).
func (s *Server) serveOnline(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	room := r.URL.Query().Get("roomId")
	err := danmaku.CheckID("roomId", room)
	if err == nil {
		err = s.authorizeRead(r, room)
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RedisTimeout)
	defer cancel()
	n, err := s.store.Online(ctx, room)
	if err != nil {
		httpx.WriteError(w, s.redisError("online", err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, OnlineResponse{RoomID: room, Online: n})
}

// OnlineResponse is the answer of GET /logic/online, declared in the root
// package.
type OnlineResponse = danmaku.OnlineResponse

func (s *Server) serveHealthz(w http.ResponseWriter, r *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RedisTimeout+time.Second)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// redisCtx bounds a Redis call of a request by Config.RedisTimeout.
func (s *Server) redisCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.RedisTimeout)
}
