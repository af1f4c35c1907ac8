// Command comet runs the WebSocket edge browsers connect to: the public
// listener serves /ws (and, with page.api_base set, the demo page calling
// logic at that address), the internal listener takes job's pushes.
// Configuration: configs/comet.yaml (-config), DANMAKU_* variables and
// -<section>.<key> flags; -help lists every knob.
package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/cometconfig"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/process"
	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/internal/telemetry"
	"github.com/danmaku/danmaku/internal/wordfilter"
	"github.com/danmaku/danmaku/route"
	"github.com/danmaku/danmaku/web"
)

func main() {
	m := NewMain()
	process.Main("comet", &m.Config, m)
}

// Config is the whole configuration of the comet binary.
type Config = cometconfig.Config

// DefaultConfig returns the defaults of every section.
func DefaultConfig() Config { return cometconfig.Default() }

// Main is the comet process: Run starts it, Close stops it.
type Main struct {
	Config Config
	// Logger, when set before Run, is used instead of one built from
	// Config.Log.
	Logger *zap.Logger
	// Server is the running comet, set by Run.
	Server *comet.Server

	log *zap.Logger
	rdb redis.UniversalClient
	// send and producer serve comet.socket_send; nil without it.
	send     *sendpath.Path
	producer *kafkax.Producer
	// stopRules ends the following of logic's send rules; rulesDone is
	// closed when it ended.
	stopRules context.CancelFunc
	rulesDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main holding the default configuration.
func NewMain() *Main { return &Main{Config: DefaultConfig()} }

// Run connects to Redis, takes the comet's lease and starts both listeners.
// It returns once they are open; the comet runs until Close.
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
	var verifier *auth.Verifier
	if c.Comet.Auth == config.AuthJWT || c.HasKeys() {
		if verifier, err = auth.New(auth.Config(c.Auth)); err != nil {
			return err
		}
	}
	// route.Dial lets comet.redis_timeout reach the socket, so a stalled
	// Redis cannot hold registrations for ReadTimeout.
	m.rdb = route.Dial(c.Redis)
	if err := m.openSend(c, log); err != nil {
		return err
	}
	srv, err := comet.New(c.Comet, comet.Deps{Store: route.New(m.rdb), Log: log,
		Registerer: telemetry.NewRegistry(), Verifier: verifier, Send: m.send})
	if err != nil {
		return err
	}
	// The demo page is served only where it can work: it needs to know
	// where logic's API is.
	if c.Page.APIBase != "" {
		srv.HandlePublic("/", web.Handler(c.Page))
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	m.Server = srv
	return nil
}

// openSend builds the send path of comet.socket_send: its own producer to
// the room topic, with the send section's checks and batching.
func (m *Main) openSend(c Config, log *zap.Logger) error {
	if !c.Comet.SocketSend {
		return nil
	}
	words, err := wordfilter.New(c.Send.BlockedWords)
	if err != nil {
		return fmt.Errorf("send.blocked_words: %w", err)
	}
	m.producer = kafkax.NewProducer(c.Kafka.Brokers, c.Kafka.Topic, c.Send.ProducerConfig())
	m.send = sendpath.New(c.Send, sendpath.Deps{Store: route.New(m.rdb), Producer: m.producer,
		IDs: sendpath.NewIDGen(c.Send.NodeID), Words: words, Log: log.Named("send")})
	// logic's rules of the send path (limits, rate limits, blocked words)
	// replace the send section's once read, and are read again every
	// send.rules_refresh and on SIGHUP.
	ctx, stop := context.WithCancel(context.Background())
	m.send.FollowRules(ctx) // before the first send
	m.stopRules, m.rulesDone = stop, make(chan struct{})
	go func() { defer close(m.rulesDone); m.send.KeepRules(ctx, false) }()
	return nil
}

// Reload reads the send section's word list file again and logic's send
// rules (SIGHUP), so a word blocked in logic is refused over the sockets
// at once.
func (m *Main) Reload() {
	if m.send == nil {
		return
	}
	if err := m.send.ReloadWords(); err != nil {
		m.log.Error("send.blocked_words not reloaded; the previous list stays", zap.Error(err))
	}
	m.send.FollowRules(context.Background())
	r := m.send.Rules()
	m.log.Info("send rules reloaded", zap.String("blocked_words", r.WordsMode), zap.Int("words", len(r.Words)))
}

// Close shuts the comet down gracefully (viewers closed with 1001, routes
// and lease removed) and closes the Redis client. Safe to call twice.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if m.Server != nil {
			errs = append(errs, m.Server.Shutdown(context.Background()))
		}
		if m.send != nil {
			m.stopRules()
			<-m.rulesDone
			m.send.Close()
			ctx, cancel := context.WithTimeout(context.Background(), m.Config.Send.ProduceTimeout)
			errs = append(errs, m.producer.Close(ctx))
			cancel()
		}
		if m.rdb != nil {
			errs = append(errs, m.rdb.Close())
		}
		if m.log != nil {
			m.log.Sync()
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}
