package stack

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Runs of lines that differ only in their time stamps become one line
// with a count; other lines stay, in order; long lines are cut.
func TestCollapse(t *testing.T) {
	long := strings.Repeat("x", 500)
	got := collapse([]string{
		`{"level":"info","ts":1795439458.69,"msg":"a"}`,
		`redis: 2026/11/23 13:11:08 pool.go:770: refused`,
		`redis: 2026/11/23 13:11:09 pool.go:770: refused`,
		`redis: 2026/11/23 13:11:10 pool.go:770: refused`,
		`{"level":"info","ts":1795439458.7,"msg":"b"}`,
		`{"level":"info","ts":1795439459.1,"msg":"b"}`,
		`{"level":"info","ts":1795439459.2,"msg":"a"}`,
		long,
	})
	want := []string{
		`{"level":"info","ts":1795439458.69,"msg":"a"}`,
		`redis: 2026/11/23 13:11:10 pool.go:770: refused  [3 times]`,
		`{"level":"info","ts":1795439459.1,"msg":"b"}  [2 times]`,
		`{"level":"info","ts":1795439459.2,"msg":"a"}`,
		long[:400] + " …",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("collapse =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A test binary that dies without its cleanups (a panic, the -timeout
// kill) takes the processes it started with it: left running, they kept
// ports and the descriptors the test inherited, a lock file that other
// runs wait on among them. The orphan test starts one in a child process
// of the test binary and exits at once.
func TestProcDiesWithTestProcess(t *testing.T) {
	if os.Getenv("STACK_ORPHAN") == "1" {
		p := StartWrapped(t, nil, "/bin/sleep", nil, "60")
		fmt.Println("PID", p.pid())
		os.Exit(0) // no cleanup
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestProcDiesWithTestProcess$")
	cmd.Env = append(os.Environ(), "STACK_ORPHAN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("orphan test: %v\n%s", err, out)
	}
	var pid int
	if _, err := fmt.Sscanf(string(out), "PID %d", &pid); err != nil || pid <= 0 {
		t.Fatalf("orphan test said %q", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d outlived the test process that started it", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
