//go:build faults

package faults_test

import (
	"os"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit/netlab"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

// TestMain runs the tests in a network namespace of their own, plugged
// into each lab's bridge as its client host.
func TestMain(m *testing.M) {
	if code := netlab.Reexec(); code >= 0 {
		os.Exit(code)
	}
	os.Exit(stack.Run(m))
}
