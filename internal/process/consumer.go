package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/telemetry"
)

// Consumer is the core of a role that consumes the room topic as a member
// of a consumer group (job, archive): Start joins the group and consumes
// in the background, Ready says whether it can do its work, Shutdown
// finishes what it holds, commits and leaves the group. Shutdown is called
// even when Start never was.
type Consumer interface {
	Start(ctx context.Context) error
	Ready(ctx context.Context) error
	Shutdown(ctx context.Context) error
}

// ConsumerRole is the life of a consuming binary around its Consumer: a
// status listener (/metrics, /healthz, /readyz) that serves at once, and a
// consumer that starts in the background once Kafka answers with the
// topic. A Kafka that cannot be reached keeps the process up and not ready
// rather than failing it, so a supervisor does not restart it in a loop
// while the broker comes up.
type ConsumerRole struct {
	// Name names the role in its log lines ("job running").
	Name     string
	Consumer Consumer
	Kafka    config.Kafka
	// MetricsAddr is where the status listener listens; Run sets it to the
	// bound address.
	MetricsAddr string
	Metrics     prometheus.Gatherer
	Log         *zap.Logger
	// ShutdownTimeout bounds Consumer.Shutdown in Close.
	ShutdownTimeout time.Duration
	// Fields are logged with "<name> running".
	Fields []zap.Field
	// Closers close the clients the consumer uses (Redis, the database),
	// in order, after it stopped.
	Closers []func() error

	server    *http.Server
	consuming atomic.Bool
	stopStart context.CancelFunc
	startDone chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Run opens the status listener and returns once it serves; in the
// background it waits until Kafka answers with the topic (creating it
// when missing, retrying every second) and starts the consumer. /readyz
// says 503 until the consumer runs, then what Consumer.Ready says. ctx
// bounds Run alone: the start-up goes on after it ends, until Close.
func (r *ConsumerRole) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", r.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", r.MetricsAddr, err)
	}
	r.MetricsAddr = ln.Addr().String()
	r.server = &http.Server{Handler: httpx.StatusMux(telemetry.Handler(r.Metrics), r.ready),
		ReadHeaderTimeout: 5 * time.Second}
	go r.server.Serve(ln)

	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stopStart, r.startDone = stop, make(chan struct{})
	go func() {
		defer close(r.startDone)
		if err := r.start(sctx); err != nil && sctx.Err() == nil {
			r.Log.Error(r.Name+" not started", zap.Error(err))
		}
	}()
	return nil
}

func (r *ConsumerRole) ready(req *http.Request) error {
	if !r.consuming.Load() {
		return danmaku.Unavailable("kafka unreachable or the topic is missing: the consumer has not started", nil)
	}
	return r.Consumer.Ready(req.Context())
}

// start waits for the topic until ctx ends, then starts the consumer.
func (r *ConsumerRole) start(ctx context.Context) error {
	k := r.Kafka
	if _, err := kafkax.EnsureTopicWait(ctx, k.Brokers, kafkax.Topic{Name: k.Topic,
		Partitions: k.Partitions, Replication: k.Replication},
		func(err error) { r.Log.Warn("kafka topic not ready, retrying", zap.Error(err)) }); err != nil {
		return fmt.Errorf("kafka topic %s: %w", k.Topic, err)
	}
	if err := r.Consumer.Start(ctx); err != nil {
		return err
	}
	r.consuming.Store(true)
	r.Log.Info(r.Name+" running", slices.Concat(r.Fields, []zap.Field{zap.String("topic", k.Topic),
		zap.Strings("brokers", k.Brokers), zap.String("metrics", r.MetricsAddr)})...)
	return nil
}

// Close stops in this order: the start-up (a start in progress returns),
// the consumer (bounded by ShutdownTimeout), the status listener (so
// /metrics answers while the consumer drains), then the Closers; it logs
// "<name> stopped". Safe to call twice, and after a Run that failed or
// never ran: what is not set is skipped.
func (r *ConsumerRole) Close() error {
	r.closeOnce.Do(func() {
		var errs []error
		if r.stopStart != nil {
			r.stopStart()
			<-r.startDone
		}
		if r.Consumer != nil {
			ctx, cancel := context.WithTimeout(context.Background(), r.ShutdownTimeout)
			errs = append(errs, r.Consumer.Shutdown(ctx))
			cancel()
		}
		if r.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			errs = append(errs, r.server.Shutdown(ctx))
			cancel()
		}
		for _, c := range r.Closers {
			errs = append(errs, c())
		}
		if r.Log != nil {
			r.Log.Info(r.Name + " stopped")
			r.Log.Sync()
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}
