package client_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

func TestMain(m *testing.M) {
	code := stack.Run(m)
	examples.stop()
	os.Exit(code)
}

// The examples' stack: one logic (with an admin secret), one job, one
// comet with token keys (auth off, so watching stays open and a token
// proves a viewer's user), started by the first example that runs.
const (
	adminSecret = "example-admin-secret"
	hmacSecret  = "example-hmac-secret-0123456789abcdef"
)

var (
	logicURL      string       // logic's base URL
	cometURL      string       // the comet's WebSocket URL
	examplesStack *stack.Stack // for tests that reach into Redis
)

// examples starts the stack once for the godoc examples, which have no
// testing.TB: mainTB stands for one, and a failure to start ends the test
// binary.
var examples exampleEnv

type exampleEnv struct {
	once sync.Once
	tb   *mainTB
}

// stop runs the stack's cleanups, newest first.
func (e *exampleEnv) stop() {
	if e.tb == nil {
		return
	}
	e.tb.mu.Lock()
	fs := e.tb.cleanups
	e.tb.cleanups = nil
	e.tb.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func exampleStack() {
	examples.once.Do(func() {
		examples.tb = &mainTB{}
		defer func() {
			if r := recover(); r != nil {
				examples.stop()
				fmt.Fprintln(os.Stderr, "the examples' stack did not start:", r)
				os.Exit(1)
			}
		}()
		s := stack.New(examples.tb, stack.Options{Comets: 1,
			Logic:    []string{"-logic.admin_secret", adminSecret},
			CometEnv: []string{"DANMAKU_AUTH_HMAC_SECRET=" + hmacSecret}})
		logicURL, cometURL, examplesStack = s.LogicURL, s.Comets[0].WS(), s
	})
}

// uniq makes the examples' room ids unique, so that a test run with
// -count=2 finds fresh rooms.
func uniq(room string) string { return testkit.Uniq(room + "-") }

// mainTB is the testing.TB of the examples' stack: cleanups run at the
// end of TestMain, a failure panics. The methods the stack does not call
// are those of the nil TB and would panic too.
type mainTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (m *mainTB) Helper()                   {}
func (m *mainTB) Name() string              { return "examples" }
func (m *mainTB) Failed() bool              { return false }
func (m *mainTB) Log(a ...any)              {}
func (m *mainTB) Logf(string, ...any)       {}
func (m *mainTB) Fatal(a ...any)            { panic(fmt.Sprint(a...)) }
func (m *mainTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (m *mainTB) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (m *mainTB) TempDir() string {
	dir, err := os.MkdirTemp("", "danmaku-examples-")
	if err != nil {
		panic(err)
	}
	m.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
func (m *mainTB) Cleanup(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleanups = append(m.cleanups, f)
}
