package e2e_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

func TestMain(m *testing.M) { os.Exit(stack.Run(m)) }

// proc is one running binary, built once per test run by stack.
type proc = stack.Proc

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return stack.Start(t, name, nil, args...)
}

func getOK(t *testing.T, url string) []byte {
	t.Helper()
	return stack.GetOK(t, url)
}

func postJSON(t *testing.T, url, body string) []byte {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

// The logic binary whose port is taken exits at once with status 1
// instead of hanging.
func TestLogicPortInUseExits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := start(t, "logic", "-config", "configs/logic.yaml", "-logic.listen", ln.Addr().String())
	select {
	case <-p.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("logic still running with its port taken")
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) || ee.ExitCode() != 1 || !strings.Contains(p.Logs(), "address already in use") {
		t.Fatalf("exit %v, output %s", p.Err(), p.Logs())
	}
}

// A port taken between the moment the harness picks it and the child's
// bind: stack.Serve starts the child again on a new port.
func TestServeStartsAgainOnNewAddress(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	rs := redisserver.Standalone(t)
	kafka := stack.DevKafka(t)
	var addrs []string
	p := stack.Serve(t, "logic", nil, func() []string {
		addr := taken.Addr().String()
		if len(addrs) > 0 {
			addr = testkit.FreeAddr(t)
		}
		addrs = append(addrs, addr)
		return []string{"-config", "configs/logic.yaml", "-redis.addrs", rs.Addr, "-kafka.brokers", kafka, "-logic.listen", addr}
	}, func() string { return "http://" + addrs[len(addrs)-1] + "/healthz" })
	if len(addrs) != 2 || !strings.Contains(p.Logs(), "address already in use") {
		t.Fatalf("started on %v; output:\n%s", addrs, p.Logs())
	}
}
