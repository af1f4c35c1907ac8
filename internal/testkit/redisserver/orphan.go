package redisserver

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// orphanEnv names the test that runs as the orphan's parent.
const orphanEnv = "TESTKIT_ORPHAN_OF"

// DiesWithTestProcess checks that a process start starts (returning its
// pid) dies with the test binary that started it when that binary exits
// without its cleanups, as a panic or the -timeout kill makes it. t's
// test runs again in a child test binary, which calls start and exits at
// once; t then waits up to 5 s for the pid to be gone. The test that
// calls it must call it first and nothing before it.
func DiesWithTestProcess(t *testing.T, start func(t *testing.T) int) {
	if os.Getenv(orphanEnv) == t.Name() {
		fmt.Println("PID", start(t))
		os.Exit(0) // no cleanup
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$")
	cmd.Env = append(os.Environ(), orphanEnv+"="+t.Name())
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
