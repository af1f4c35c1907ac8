package stack

import (
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
)

// bindRetries is how many times a child that lost one of its addresses
// before binding it is started again on new ones.
const bindRetries = 3

// child is a process of cmd/ being started. args returns its arguments
// with addresses picked anew on every call (testkit.FreeAddr); health
// returns the URL that answers 200 once it serves, for the addresses of
// the last args call.
type child struct {
	*Proc
	args   func() []string
	health func() string
}

func launch(tb testing.TB, name string, env []string, args func() []string, health func() string) *child {
	tb.Helper()
	return &child{Proc: Start(tb, name, env, args()...), args: args, health: health}
}

// wait waits until c serves, failing tb when it exits meanwhile. A port
// FreeAddr picked is free only until another socket takes it (an outgoing
// connection's ephemeral port, another test's server), and the child binds
// it a moment later: a child that exits saying an address is in use is
// started again on new addresses.
func (c *child) wait(tb testing.TB) {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		exited, err := serving(c.Proc, c.health())
		switch {
		case err != nil:
			tb.Fatalf("%s not serving after 30 s: %v", c.Name, err)
		case !exited:
			return
		case attempt > bindRetries || !strings.Contains(c.lastLogs(), "address already in use"):
			tb.Fatalf("%s exited while starting: %v\n%s", c.Name, c.Err(), c.Logs())
		}
		c.restart(tb, "an address was taken: started again on new addresses", c.args())
	}
}

// Serve starts binary name like Start and waits until it answers 200 at
// the URL health returns. args returns the arguments with the process's
// addresses picked anew on every call; when the process exits because one
// of them was taken before it could bind it, args is called again and the
// process started again, up to three times.
func Serve(tb testing.TB, name string, env []string, args func() []string, health func() string) *Proc {
	tb.Helper()
	c := launch(tb, name, env, args, health)
	c.wait(tb)
	return c.Proc
}

// waitServing waits until url answers 200, failing tb at once when p
// exits meanwhile.
func waitServing(tb testing.TB, p *Proc, url string) {
	tb.Helper()
	exited, err := serving(p, url)
	switch {
	case exited:
		tb.Fatalf("%s exited while starting: %v\n%s", p.Name, p.Err(), p.Logs())
	case err != nil:
		tb.Fatalf("%s not serving after 30 s: %v", p.Name, err)
	}
}

// serving waits up to 30 s until url answers 200 or p exits.
func serving(p *Proc, url string) (exited bool, err error) {
	err = testkit.Soon(30*time.Second, func() error {
		select {
		case <-p.Done():
			return nil
		default:
		}
		return get200(url)
	})
	select {
	case <-p.Done():
		return true, nil
	default:
		return false, err
	}
}
