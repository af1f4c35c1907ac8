// Package process is the common main() of the service's binaries: load the
// configuration, start the role, wait for SIGINT or SIGTERM, shut down
// gracefully, and exit with a status that says what went wrong.
package process

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/danmaku/danmaku/internal/config"
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

// Exit statuses.
const (
	ExitFailure = 1 // the role failed to start or to shut down cleanly
	ExitConfig  = 2 // invalid configuration or arguments
)

// Main loads cfg (a pointer to the role's configuration, holding the
// defaults) from os.Args and the environment, runs role until a signal
// arrives, and closes it. It does not return on failure: it exits. A second
// signal during shutdown kills the process.
func Main(name string, cfg any, role Role) {
	err := config.Load(cfg, config.Options{Name: name, Args: os.Args[1:], Environ: os.Environ()})
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
		os.Exit(ExitFailure)
	}
	var done <-chan struct{}
	if s, ok := role.(Stopper); ok {
		done = s.Done()
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
