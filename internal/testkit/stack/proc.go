package stack

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

// Proc is one running binary of cmd/. Its output (the roles log JSON
// lines to stderr) is kept over restarts. When the test fails it is
// written to a file and its last lines are printed (see report).
type Proc struct {
	Name string
	args []string
	env  []string
	dir  string
	bin  string
	wrap []string // runs bin, e.g. ip netns exec NAME; empty: bin runs itself

	mu   sync.Mutex // guards log, from, cmd, done, err
	log  bytes.Buffer
	from int // offset in log of the current process's output
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs binary name with args in the module root. env adds
// environment variables (KEY=VALUE) to the test's own. The process is
// killed when tb ends.
func Start(tb testing.TB, name string, env []string, args ...string) *Proc {
	tb.Helper()
	return StartWrapped(tb, nil, name, env, args...)
}

// StartWrapped is Start with the binary run through wrap, a command that
// executes its arguments in place (ip netns exec NAME), so signals still
// reach the binary itself. name may also be the absolute path of another
// program (a redis-server).
func StartWrapped(tb testing.TB, wrap []string, name string, env []string, args ...string) *Proc {
	tb.Helper()
	bin := name
	if !filepath.IsAbs(name) {
		bin = filepath.Join(Binaries(tb), name)
	}
	// Temporary files of the process (the all-in-one's archive database)
	// go away with the test, also when it was killed.
	env = append([]string{"TMPDIR=" + tb.TempDir()}, env...)
	p := &Proc{Name: filepath.Base(name), args: args, env: env, dir: Root(tb), bin: bin, wrap: wrap}
	if err := p.start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Log(p.report(tb))
		}
	})
	return p
}

func (p *Proc) start() error {
	cmd := exec.Command(p.bin, p.args...)
	if len(p.wrap) > 0 {
		cmd = exec.Command(p.wrap[0], append(append(p.wrap[1:len(p.wrap):len(p.wrap)], p.bin), p.args...)...)
	}
	cmd.Dir = p.dir
	cmd.SysProcAttr = redisserver.ChildAttr() // dies with the test binary
	cmd.Stdout, cmd.Stderr = p, p
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), p.env...)
	// The parent of a child with a death signal is the thread that
	// started it: keep this goroutine on it while it does.
	runtime.LockOSThread()
	err := cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.err, p.from = cmd, done, nil, p.log.Len()
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Write collects the process's output.
func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

// Environment of the test run that sets what a failed test prints of a
// process's output.
const (
	// LogLinesEnv is how many of the last lines are printed; 0 prints all.
	LogLinesEnv = "STACKTEST_LOG_LINES"
	// LogDirEnv is where the whole output is written (default: the
	// system's temporary directory, under danmaku-test-logs).
	LogDirEnv = "STACKTEST_LOG_DIR"
)

// report writes everything the process wrote to a file and returns its
// name with the last lines (LogLinesEnv, 8 unless set), so a failure's own
// message stays near the end of the test's output, where a CI log tail
// shows it. Repeats of a line (timestamps aside) count as one, and lines
// are cut at 400 bytes.
func (p *Proc) report(tb testing.TB) string {
	all := p.Logs()
	where, err := saveLog(tb.Name()+"."+p.Name, all)
	if err != nil {
		where = fmt.Sprintf("no file (%v)", err)
	}
	keep := 8
	if n, err := strconv.Atoi(os.Getenv(LogLinesEnv)); err == nil && n >= 0 {
		keep = n
	}
	lines := collapse(strings.Split(strings.TrimRight(all, "\n"), "\n"))
	if keep > 0 && len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	return fmt.Sprintf("%s output, all in %s; the last lines:\n%s", p.Name, where, strings.Join(lines, "\n"))
}

// saveLog writes text to a new file in the log directory (LogDirEnv)
// whose name starts with name, and returns the file's path.
func saveLog(name, text string) (string, error) {
	dir := os.Getenv(LogDirEnv)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "danmaku-test-logs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".*.log")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}

// stamp matches what makes two otherwise equal log lines differ: zap's
// "ts" field and a Go log prefix's date and time.
var stamp = regexp.MustCompile(`"ts":[0-9.e+]+|\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(\.\d+)?`)

// collapse replaces each run of lines equal but for their time stamps by
// its last line and a count, and cuts long lines.
func collapse(lines []string) []string {
	var out []string
	for i := 0; i < len(lines); {
		j := i + 1
		key := stamp.ReplaceAllString(lines[i], "")
		for j < len(lines) && stamp.ReplaceAllString(lines[j], "") == key {
			j++
		}
		l := lines[j-1]
		if len(l) > 400 {
			l = l[:400] + " …"
		}
		if j-i > 1 {
			l = fmt.Sprintf("%s  [%d times]", l, j-i)
		}
		out = append(out, l)
		i = j
	}
	return out
}

// Logs returns everything the process wrote so far.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// lastLogs returns what the current (or last) process wrote.
func (p *Proc) lastLogs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()[p.from:]
}

// LogLines returns the JSON log lines the process wrote, decoded, in
// order; lines that are not JSON objects are left out.
func (p *Proc) LogLines() []map[string]any {
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.Logs()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			lines = append(lines, l)
		}
	}
	return lines
}

// Logged reports whether the process wrote a JSON log line whose "msg" is
// msg.
func (p *Proc) Logged(msg string) bool {
	for _, l := range p.LogLines() {
		if l["msg"] == msg {
			return true
		}
	}
	return false
}

// pid is the current process's id.
func (p *Proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Done is closed when the current process exits; Err is then its exit
// error.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Err is the exit error of the process after Done.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *Proc) signal(s os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(s)
}

// Kill ends the process with SIGKILL (no graceful shutdown: a crash) and
// waits for it to exit. A paused process is killed too.
func (p *Proc) Kill() {
	p.signal(syscall.SIGKILL)
	<-p.Done()
}

// Stop sends SIGTERM and fails tb unless the process exits cleanly within
// 20 s.
func (p *Proc) Stop(tb testing.TB) {
	tb.Helper()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.Done():
		if err := p.Err(); err != nil {
			tb.Errorf("%s exited with %v", p.Name, err)
		}
	case <-time.After(20 * time.Second):
		tb.Errorf("%s did not stop within 20 s of SIGTERM", p.Name)
	}
}

// Reload sends SIGHUP: the roles read their word lists (and a comet
// logic's send rules) again.
func (p *Proc) Reload(tb testing.TB) {
	tb.Helper()
	if err := p.signal(syscall.SIGHUP); err != nil {
		tb.Fatalf("reload %s: %v", p.Name, err)
	}
}

// Pause stops the process (SIGSTOP): its sockets stay open and nothing
// is read or written, as in a long GC pause or CPU starvation.
func (p *Proc) Pause(tb testing.TB) {
	tb.Helper()
	if err := p.signal(syscall.SIGSTOP); err != nil {
		tb.Fatalf("pause %s: %v", p.Name, err)
	}
}

// Continue resumes a paused process (SIGCONT).
func (p *Proc) Continue(tb testing.TB) {
	tb.Helper()
	if err := p.signal(syscall.SIGCONT); err != nil {
		tb.Fatalf("continue %s: %v", p.Name, err)
	}
}

// Restart starts the binary again with the same arguments and environment
// after it exited (Kill or Stop).
func (p *Proc) Restart(tb testing.TB) {
	tb.Helper()
	p.restart(tb, "restarted", p.args)
}

func (p *Proc) restart(tb testing.TB, why string, args []string) {
	tb.Helper()
	select {
	case <-p.Done():
	default:
		tb.Fatalf("restart %s: still running", p.Name)
	}
	p.Write([]byte("--- stack: " + why + " ---\n"))
	p.args = args
	if err := p.start(); err != nil {
		tb.Fatalf("restart %s: %v", p.Name, err)
	}
}
