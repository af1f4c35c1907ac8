// Package stack runs the service as separate processes for fault
// tests: a redis-server of the test's own (killable, restartable empty on
// the same port, pausable) or a Redis Cluster of its own with replicas
// (Options.Cluster: masters to kill, replicas to promote), cmd/devkafka,
// logic, one or more jobs and one or more comets, each a child process
// built once per test binary, with short timings set by flags.
// Stack.Viewer connects a viewer (package wsviewer) to its comets; Sender
// posts messages to logic and records the accepted ids;
// wsviewer.DeliveredOnce and Delivered check that every viewer showed every
// accepted id.
//
// Children get their listen addresses from testkit.FreeAddr, which
// closes the port before the child binds it; a child that exits because
// another socket took one meanwhile is started again on new addresses
// (Serve).
//
// Everything a test starts is stopped by its cleanup. The test binary's
// TestMain must call Run, which also removes the built binaries:
//
//	func TestMain(m *testing.M) { os.Exit(stack.Run(m)) }
package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

// The binaries Build makes, each from ./cmd/<name>.
var binaryNames = []string{"logic", "job", "comet", "archive", "devkafka", "danmaku"}

var (
	buildOnce sync.Once
	binDir    string
	rootDir   string
	buildErr  error
)

// Run runs the tests, then stops every redis-server they started and
// removes the binaries built for them.
func Run(m *testing.M) int {
	code := redisserver.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}

// Binaries builds every binary of cmd/ once per test binary and returns
// their directory.
func Binaries(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(build)
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binDir
}

// Root returns the module's root directory: binaries run there, so the
// shipped configs/ are found by their relative paths.
func Root(tb testing.TB) string {
	tb.Helper()
	Binaries(tb)
	return rootDir
}

func build() {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		buildErr = fmt.Errorf("go env GOMOD: %v %q", err, out)
		return
	}
	rootDir = filepath.Dir(strings.TrimSpace(string(out)))
	if binDir, buildErr = os.MkdirTemp("", "danmaku-bin-"); buildErr != nil {
		return
	}
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
	for _, n := range binaryNames {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = rootDir
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go build: %v\n%s", err, out)
	}
}
