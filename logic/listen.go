package logic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/internal/telemetry"
)

// listener is one HTTP server Start runs.
type listener struct {
	http   *http.Server
	ln     net.Listener
	served chan struct{} // closed when Serve returned
}

// Start listens on Config.Listen (and Config.AdminAddr when set) and
// serves Handler with /metrics in the background; with Config.AdminAddr,
// AdminHandler and /metrics are served there instead and the public
// listener has neither. It creates the topic when it is missing
// (EnsureTopic) in the background too, retrying until Kafka answers or
// Shutdown: a port in use fails at once, an unreachable Kafka does not
// (/healthz answers at once, /readyz says 503 until Kafka answers with the
// topic, as an orchestrator expects). It returns once serving. An
// all-in-one binary mounts Handler instead and does not call Start.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s (logic.listen): %w", s.cfg.Listen, err)
	}
	var adminLn net.Listener
	if s.cfg.AdminAddr != "" {
		if adminLn, err = net.Listen("tcp", s.cfg.AdminAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listen %s (logic.admin_addr): %w", s.cfg.AdminAddr, err)
		}
	}
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopTopic, s.topicDone = stop, make(chan struct{})
	go func() {
		defer close(s.topicDone)
		// The send path's rules go to Redis for the comets that take
		// sends over their sockets (sendpath.Rules).
		rules := make(chan struct{})
		go func() { defer close(rules); s.send.KeepRules(tctx, true) }()
		defer func() { <-rules }()
		if err := s.EnsureTopic(tctx); err != nil && tctx.Err() == nil {
			s.log.Error("kafka topic not created", zap.Error(err))
		}
		s.canaries.run(tctx)
	}()
	metrics := telemetry.Handler(s.gatherer)
	pub := http.NewServeMux()
	pub.Handle("/", s.Handler())
	if adminLn == nil {
		pub.Handle("/metrics", metrics)
	} else {
		adm := http.NewServeMux()
		adm.Handle("/", s.AdminHandler())
		adm.Handle("/metrics", metrics)
		s.adm = s.serve(adminLn, adm)
		s.log.Info("logic admin API and /metrics listening", zap.String("addr", adminLn.Addr().String()))
	}
	s.pub = s.serve(ln, pub)
	s.log.Info("logic listening", zap.String("addr", s.Addr()),
		zap.Strings("kafka", s.kafka.Brokers), zap.String("topic", s.kafka.Topic))
	return nil
}

// StartCanaries writes the delivery canaries (Config.CanaryInterval; 0:
// off) in the background until Shutdown, for a binary that mounts Handler
// and does not call Start (Start writes them itself once the topic
// exists): call it once the topic exists.
func (s *Server) StartCanaries(ctx context.Context) {
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopTopic, s.topicDone = stop, make(chan struct{})
	go func() {
		defer close(s.topicDone)
		s.canaries.run(cctx)
	}()
}

// serve runs an HTTP server of h on ln with the configured timeouts.
func (s *Server) serve(ln net.Listener, h http.Handler) listener {
	l := listener{ln: ln, served: make(chan struct{}), http: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout(),
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}}
	go func() {
		defer close(l.served)
		if err := l.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http serve", zap.Error(err))
		}
	}()
	return l
}

// Addr is the address Start listens on (useful with port 0); empty before
// Start.
func (s *Server) Addr() string { return s.pub.addr() }

// AdminAddr is the address of the admin listener; empty before Start and
// without Config.AdminAddr.
func (s *Server) AdminAddr() string { return s.adm.addr() }

func (l *listener) addr() string {
	if l.ln == nil {
		return ""
	}
	return l.ln.Addr().String()
}

// stop shuts the server down within ctx, closing it when ctx ends first.
func (l *listener) stop(ctx context.Context) error {
	if l.http == nil {
		return nil
	}
	err := l.http.Shutdown(ctx)
	if err != nil {
		l.http.Close()
		err = fmt.Errorf("http shutdown: %w", err)
	}
	<-l.served
	return err
}

// Shutdown stops taking requests, lets those in flight finish, then
// flushes and closes the Kafka producer, all within ctx and
// Config.ShutdownTimeout. Without Start it only closes the producer: call
// it once the server that mounts Handler stopped handing it requests. Safe
// to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	if s.stopTopic != nil {
		s.stopTopic()
		<-s.topicDone
	}
	errs := []error{s.pub.stop(ctx), s.adm.stop(ctx)}
	s.send.Close()
	if err := s.producer.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("logic stopped")
	return errors.Join(errs...)
}
