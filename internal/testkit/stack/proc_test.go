package stack

import (
	"reflect"
	"strings"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit/redisserver"
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
	redisserver.DiesWithTestProcess(t, func(t *testing.T) int {
		return StartWrapped(t, nil, "/bin/sleep", nil, "60").pid()
	})
}
