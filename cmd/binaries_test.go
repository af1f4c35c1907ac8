package cmd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/redistest"
	"github.com/danmaku/danmaku/internal/testutil"
)

func TestMain(m *testing.M) {
	code := redistest.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds every binary once per test run and returns their
// directory.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "danmaku-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
			"./logic", "./job", "./comet", "./devkafka", "./danmaku")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// proc is one running binary; its stderr (where the roles log) is kept.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(filepath.Join(binaries(t), name), args...), done: make(chan struct{})}
	p.cmd.Dir = ".."
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.logs())
		}
	})
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s exited with %v", p.name, p.err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("%s did not stop within 20 s of SIGTERM", p.name)
	}
}

// devKafka starts cmd/devkafka on a free port and returns its address.
func devKafka(t *testing.T) string {
	t.Helper()
	p := start(t, "devkafka", "-addr", "127.0.0.1:0")
	re := regexp.MustCompile(`listening on (\S+)`)
	var addr string
	testutil.SucceedsSoon(t, 10*time.Second, func() error {
		m := re.FindStringSubmatch(p.logs())
		if m == nil {
			return fmt.Errorf("devkafka has not said where it listens: %q", p.logs())
		}
		addr = m[1]
		return nil
	})
	return addr
}

func getOK(t *testing.T, url string) []byte {
	t.Helper()
	var body []byte
	testutil.SucceedsSoon(t, 30*time.Second, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		return nil
	})
	return body
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

// logged reports whether p wrote a JSON log line with message msg.
func logged(p *proc, msg string) bool {
	sc := bufio.NewScanner(strings.NewReader(p.logs()))
	for sc.Scan() {
		var l struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == msg {
			return true
		}
	}
	return false
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
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("logic still running with its port taken")
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != 1 || !strings.Contains(p.logs(), "address already in use") {
		t.Fatalf("exit %v, output %s", p.err, p.logs())
	}
}
