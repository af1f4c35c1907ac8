package stack

import (
	"reflect"
	"strings"
	"testing"
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
