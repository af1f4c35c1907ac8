package deploy_test

import (
	"os"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit/stack"
)

// TestMain stops the servers the stack tests started and removes the
// binaries built for them.
func TestMain(m *testing.M) { os.Exit(stack.Run(m)) }
