package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencies pins what the job binary may link: it pushes to comets
// over HTTP and has no business with WebSockets, the comet itself or the
// demo page's assets. A new import that pulls one of them in fails here,
// naming the package.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !slices.Contains(deps, "github.com/danmaku/danmaku/job") {
		t.Fatalf("go list -deps listed %d packages without the job package: %q", len(deps), out)
	}
	forbidden := []string{
		"github.com/gorilla/websocket",
		"github.com/danmaku/danmaku/web",
		"github.com/danmaku/danmaku/comet",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("cmd/job depends on %s", dep)
			}
		}
	}
}
