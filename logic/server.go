package logic

import (
	"context"
	"errors"
	"fmt"
	"github.com/danmaku/danmaku/internal/httpx"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/route"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// Deps are what a Server needs from outside. The Server owns the Kafka
// producer it builds from Kafka; it does not own Redis.
type Deps struct {
	// Redis backs the rate limiter and the online count (through route).
	// Build it with ContextTimeoutEnabled so a stalled Redis cannot hold a
	// request past Config.RedisTimeout.
	Redis redis.UniversalClient
	// Kafka names the brokers and the room topic.
	Kafka config.Kafka
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Server is the logic HTTP API. Create it with New, mount Handler, call
// Close when done.
type Server struct {
	cfg    Config
	kafka  config.Kafka
	lim    limits
	store  *route.Store
	writer *kafka.Writer
	ids    *idGen
	log    *zap.Logger
	m      *metrics
	mux    *http.ServeMux

	closeOnce sync.Once
	closeErr  error
}

// New builds a Server. It does no network I/O: the producer connects on
// first use, and EnsureTopic creates the topic when asked to.
func New(cfg Config, d Deps) (*Server, error) {
	if err := config.Validate(&cfg); err != nil {
		return nil, err
	}
	if d.Redis == nil {
		return nil, errors.New("logic: Deps.Redis is nil")
	}
	if len(d.Kafka.Brokers) == 0 {
		return nil, errors.New("logic: Deps.Kafka has no brokers")
	}
	if err := config.Validate(&d.Kafka); err != nil {
		return nil, fmt.Errorf("logic: Deps.Kafka: %w", err)
	}
	log := d.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{
		cfg:   cfg,
		kafka: d.Kafka,
		lim:   limits{maxMessages: cfg.MaxMessages, maxContent: cfg.MaxContentRunes, maxName: cfg.MaxNameRunes},
		store: route.New(d.Redis),
		writer: kafkax.NewWriter(d.Kafka.Brokers, d.Kafka.Topic, kafkax.WriterConfig{
			BatchTimeout: cfg.BatchTimeout,
			BatchSize:    cfg.BatchSize,
			WriteTimeout: cfg.ProduceTimeout,
			MaxAttempts:  cfg.ProduceAttempts,
			DialTimeout:  min(cfg.ProduceTimeout, 5*time.Second),
		}),
		ids: newIDGen(cfg.NodeID),
		log: log,
		m:   newMetrics(d.Registerer),
		mux: http.NewServeMux(),
	}
	s.handle("/logic/send", "send", s.serveSend)
	s.handle("/logic/online", "online", s.serveOnline)
	s.handle("/healthz", "healthz", s.serveHealthz)
	s.handle("/readyz", "readyz", s.serveReadyz)
	s.handle("/", "other", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, danmaku.Errorf(danmaku.ENOTFOUND, "path", "no endpoint %s", r.URL.Path))
	})
	return s, nil
}

// Handler serves /logic/send, /logic/online, /healthz and /readyz, with
// CORS for Config.AllowedOrigins. An
// all-in-one binary may mount it for "/logic/" only and use Ready for its
// own readiness check.
func (s *Server) Handler() http.Handler { return s.withCORS(s.mux) }

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

// Close flushes and closes the producer. Call it after the HTTP server has
// stopped handing requests to Handler. Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.writer.Close() })
	return s.closeErr
}

// handle registers fn under path and counts its answers by status code.
func (s *Server) handle(path, name string, fn func(w http.ResponseWriter, r *http.Request)) {
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
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
	httpx.WriteError(w, danmaku.Errorf(httpx.CodeMethod, "method", "%s not allowed, use %s", r.Method, method))
	return false
}

// serveSend is POST /logic/send: validate, rate-limit, stamp, produce,
// and answer 202 only once Kafka acknowledged every message.
func (s *Server) serveSend(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	req, err := decodeSend(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	ids, err := s.lim.validate(&req)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if retry, err := s.allow(r.Context(), req.UserID, len(req.Messages)); err != nil {
		if retry > 0 {
			s.m.observeRateLimited()
			w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
		}
		httpx.WriteError(w, err)
		return
	}
	if err := s.produce(r.Context(), &req, ids); err != nil {
		httpx.WriteError(w, err)
		return
	}
	s.m.observeAccepted(len(ids))
	httpx.WriteJSON(w, http.StatusAccepted, SendResponse{MsgIDs: ids})
}

// allow takes n tokens from the user's bucket. A refusal is an ERATELIMIT
// error with the wait in whole seconds, rounded up and at least one, for
// the Retry-After header.
func (s *Server) allow(ctx context.Context, uid int64, n int) (retryAfter int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	ok, wait, err := s.store.Allow(ctx, strconv.FormatInt(uid, 10), n, s.cfg.RateLimit, s.cfg.RateBurst)
	if err != nil {
		return 0, s.redisError("rate limit", err)
	}
	if ok {
		return 0, nil
	}
	secs := max(int64((wait+time.Second-1)/time.Second), 1)
	return secs, danmaku.Errorf(danmaku.ERATELIMIT, "userId",
		"rate limit exceeded: %g messages per second, burst %d; retry in %d s", s.cfg.RateLimit, s.cfg.RateBurst, secs)
}

// produce assigns ids and the server time and writes the request's
// messages in one WriteMessages call, so they travel in the same batches.
func (s *Server) produce(ctx context.Context, req *SendRequest, ids []string) error {
	ts := time.Now()
	tsMs := ts.UnixMilli()
	key := []byte(req.RoomID)
	msgs := make([]kafka.Message, len(req.Messages))
	for i, m := range req.Messages {
		if ids[i] == "" {
			ids[i] = s.ids.next()
		}
		value, err := danmaku.MarshalEnvelope(req.RoomID, danmaku.Message{
			ID: ids[i], UID: req.UserID, Name: req.UserName, Content: m.Content, TS: tsMs,
		})
		if err != nil {
			return fmt.Errorf("encode envelope: %w", err)
		}
		msgs[i] = kafka.Message{Key: key, Value: value, Time: ts}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	err := s.writer.WriteMessages(ctx, msgs...)
	s.m.observeProduce(time.Since(start), err)
	if err != nil {
		// Sampled by the logger: an outage logs a few lines a second, not
		// one per request.
		s.log.Warn("kafka produce failed", zap.String("room", req.RoomID), zap.Int("messages", len(msgs)), zap.Error(err))
		return danmaku.Unavailable("kafka unavailable, message not accepted; retry with the same msgId", err)
	}
	return nil
}

func (s *Server) redisError(op string, err error) error {
	if code := danmaku.ErrorCode(err); code == danmaku.EUNAVAILABLE || errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("redis call failed", zap.String("op", op), zap.Error(err))
		return danmaku.Unavailable("redis unavailable", err)
	}
	return err
}

// serveOnline is GET /logic/online?roomId=: the room's viewer count.
func (s *Server) serveOnline(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	room := r.URL.Query().Get("roomId")
	if err := danmaku.CheckID("roomId", room); err != nil {
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

// OnlineResponse is the answer of GET /logic/online.
type OnlineResponse struct {
	RoomID string `json:"roomId"`
	Online int64  `json:"online"`
}

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
