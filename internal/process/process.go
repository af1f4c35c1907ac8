// Package process is the common main() of the service's binaries: load the
// configuration, start the role, wait for SIGINT or SIGTERM, shut down
// gracefully, and exit with a status that says what went wrong; and the
// life of the roles that consume the room topic (ConsumerRole).
package process

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/telemetry"
)

// Role is a binary's Main value: Run starts it and returns once it serves,
// Close stops it gracefully and is safe to call twice.
type Role interface {
	Run(ctx context.Context) error
	Close() error
}

// Stopper is implemented by roles that can stop by themselves (a fatal
// error); Main then shuts down as on a signal.
type Stopper interface {
	Done() <-chan struct{}
}

// Reloader is implemented by roles that re-read files on SIGHUP (the
// blocked-word list); Main calls Reload for each SIGHUP and logs nothing
// itself: Reload reports its own outcome.
type Reloader interface {
	Reload()
}

// Exit statuses.
const (
	ExitFailure = 1 // the role failed to start or to shut down cleanly
	ExitConfig  = 2 // invalid configuration or arguments
)

// Main reads cfg (a pointer to the role's configuration, holding the
// defaults) from os.Args and the environment, runs role until a signal
// arrives, and closes it. The role's Run validates the configuration (once,
// with errors naming section and key). Main does not return on failure: it
// exits. A second signal during shutdown kills the process.
func Main(name string, cfg any, role Role) {
	err := config.Parse(cfg, config.Options{Name: name, Args: os.Args[1:], Environ: os.Environ()})
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(ExitConfig)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := role.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		role.Close()
		var fe *config.FieldError
		if errors.As(err, &fe) {
			os.Exit(ExitConfig)
		}
		os.Exit(ExitFailure)
	}
	var done <-chan struct{}
	if s, ok := role.(Stopper); ok {
		done = s.Done()
	}
	var hup chan os.Signal
	if rl, ok := role.(Reloader); ok {
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for range hup {
				rl.Reload()
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-done:
	}
	stop() // from here on a second signal has its default effect
	if err := role.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: shutdown: %v\n", name, err)
		os.Exit(ExitFailure)
	}
}

// Logger returns given when it is not nil, else a logger built from c.
// A logger it builds also receives the go-redis client's own messages
// (such as each failed dial while a server is down), at warn under the
// name "redis", so they are JSON lines sampled like the role's own instead
// of unsampled plain text on stderr.
func Logger(given *zap.Logger, c config.Log) (*zap.Logger, error) {
	if given != nil {
		return given, nil
	}
	log, err := telemetry.NewLogger(c)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(redisLogger{log.Named("redis").WithOptions(zap.AddCallerSkip(2))})
	return log, nil
}

// redisLogger passes go-redis's messages to zap. The formatted text is the
// message, so the sampler counts repeats of the same message together.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn(fmt.Sprintf(format, v...))
}

// CheckRedis pings Redis once at start-up and logs at warn when it does
// not answer: the role starts anyway (Redis may come up later), but the
// operator learns now why requests will fail.
func CheckRedis(ctx context.Context, rdb redis.UniversalClient, c config.Redis, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		// The client retries until ctx ends; a plain dial tells why.
		for _, addr := range c.Addrs {
			conn, derr := net.DialTimeout("tcp", addr, c.DialTimeout)
			if derr != nil {
				err = derr
				continue
			}
			conn.Close()
			break
		}
		log.Warn("redis does not answer; starting anyway, requests that need it fail until it does",
			zap.Strings("addrs", c.Addrs), zap.Error(err))
	}
}
