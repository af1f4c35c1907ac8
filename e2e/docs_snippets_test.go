package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// The docs' shell snippets marked <!-- snippet: NAME --> are run by
// TestDocSnippets exactly as written, with bash, in a clean environment:
// a fresh HOME and working directory, PATH with the system's tools and a
// "go" whose "go run ./cmd/NAME" and "go run ./docs/examples/NAME" start
// the binaries built for the test. They listen on the ports the docs name,
// so the run happens in a network namespace of its own (unshare -rn, with
// loopback up), where those ports are free and nothing else sees them.
const (
	snippetsInnerEnv = "SNIPPETS_NETNS" // set in the namespace: run the scenarios
	snippetsBinsEnv  = "SNIPPETS_BINS"  // directories of the built binaries
	snippetsRootEnv  = "SNIPPETS_ROOT"  // the module root
)

// snippet returns the fenced block that follows <!-- snippet: name --> in
// the file (relative to the module root), as written.
func snippet(t *testing.T, root, file, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- snippet: " + regexp.QuoteMeta(name) + " -->\n```sh\n(.*?)```\n").FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no snippet %q", file, name)
	}
	return string(m[1])
}

// waitFor is shell lines that wait up to a minute for url to answer 2xx,
// and end the script (bash -e) when it does not.
func waitFor(url string) string {
	return fmt.Sprintf("for i in $(seq 300); do curl -fs %s >/dev/null && break; sleep 0.2; done\ncurl -fsS %[1]s >/dev/null\n", url)
}

// TestDocSnippets runs the scenarios of the docs a new user follows: the
// README's quick start, the role binaries with secrets in the environment
// (docs/running.md), the role binaries with files of "danmaku config init"
// and tokens of "danmaku token", the Go backend example against them, and
// the curl examples of docs/integrate.md.
func TestDocSnippets(t *testing.T) {
	if os.Getenv(snippetsInnerEnv) == "" {
		runInNamespace(t)
		return
	}
	root, bins := os.Getenv(snippetsRootEnv), os.Getenv(snippetsBinsEnv)

	t.Run("quick start", func(t *testing.T) {
		sh := newSnippetShell(t, root, bins)
		// The first command serves until Ctrl-C; the next ones run in
		// another shell.
		sh.start(snippet(t, root, "README.md", "quickstart-run"))
		out := sh.run(waitFor("localhost:8090/readyz") + snippet(t, root, "README.md", "quickstart-curl"))
		if !strings.Contains(out, `"msgIds":[`) || !strings.Contains(out, `"online":`) {
			t.Fatalf("quick start:\n%s", out)
		}
	})

	t.Run("roles separately", func(t *testing.T) {
		sh := newSnippetShell(t, root, bins)
		sh.run(snippet(t, root, "docs/running.md", "roles") + waitFor("localhost:8090/readyz") +
			waitFor("localhost:8080/readyz") + waitFor("localhost:8082/readyz"))
		viewerGetsMessage(t, "ws://localhost:8080/ws?room=lobby", "", "from the roles snippet")
		if page := stack.GetOK(t, "http://localhost:8080/"); !bytes.Contains(page, []byte("danmaku.js")) {
			t.Errorf("the comet serves no demo page:\n%.300s", page)
		}
	})

	t.Run("roles with tokens", func(t *testing.T) {
		sh := newSnippetShell(t, root, bins)
		out := sh.run(snippet(t, root, "docs/running.md", "roles-auth") + waitFor("localhost:8090/readyz") +
			waitFor("localhost:8080/readyz") + waitFor("localhost:8082/readyz") +
			snippet(t, root, "docs/running.md", "token") + "echo\n" +
			snippet(t, root, "docs/integrate.md", "backend"))
		for _, want := range []string{"valid configuration of comet", `"msgIds":["`, `"roomId":"lobby"`,
			"accepted: [u42-welcome-1]", "notice: [to42-gift-981]", `viewer: "watched" at position`, "http://localhost:8080/?room=lobby#token=eyJ"} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in the output:\n%s", want, out)
			}
		}
		tok := strings.TrimSpace(sh.run("go run ./cmd/danmaku token -config local/logic.yaml -uid 7 -rooms lobby"))
		viewerGetsMessage(t, "ws://localhost:8080/ws?room=lobby&token="+tok, tok, "to a viewer with a token")
	})

	t.Run("helm", func(t *testing.T) {
		sh := newSnippetShell(t, root, bins)
		out := sh.run(snippet(t, root, "docs/running.md", "helm"))
		for _, want := range []string{"3 kind: Deployment", "kind: Secret", "kind: HorizontalPodAutoscaler"} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in the output:\n%s", want, out)
			}
		}
		if !regexp.MustCompile(`(?m)^eyJ[\w-]+\.[\w-]+\.[\w-]+$`).MatchString(out) {
			t.Errorf("no token in the output:\n%s", out)
		}
	})

	t.Run("integrate", func(t *testing.T) {
		sh := newSnippetShell(t, root, bins)
		script := snippet(t, root, "docs/integrate.md", "integrate-start") + waitFor("localhost:8090/readyz")
		for _, name := range []string{"history", "admin", "priority", "notices"} {
			script += "echo '== " + name + "'\n" + snippet(t, root, "docs/integrate.md", name) + "echo\n"
		}
		out := sh.run(script)
		if strings.Contains(out, `"error"`) || strings.Count(out, "\n{") < 10 {
			t.Fatalf("the examples of docs/integrate.md:\n%s", out)
		}
	})
}

// runInNamespace runs TestDocSnippets again in a network namespace of its
// own and fails with its output when it fails.
func runInNamespace(t *testing.T) {
	bins := stack.Binaries(t)
	root := stack.Root(t)
	examples := t.TempDir()
	build := exec.Command("go", "build", "-o", examples+string(filepath.Separator), "./docs/examples/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./docs/examples/...: %v\n%s", err, out)
	}
	// The helm the docs run with go run, at the version they name.
	helmRef := regexp.MustCompile(`go run (helm\.sh/helm/v3/cmd/helm@v[0-9.]+)`).FindStringSubmatch(snippet(t, root, "docs/running.md", "helm"))
	if helmRef == nil {
		t.Fatal("the helm snippet of docs/running.md runs no helm with go run")
	}
	install := exec.Command("go", "install", helmRef[1])
	install.Dir, install.Env = root, append(os.Environ(), "GOBIN="+examples)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", helmRef[1], err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-rn", "sh", "-c", `ip link set lo up && exec "$@"`, "sh",
		os.Args[0], "-test.run=^TestDocSnippets$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), snippetsInnerEnv+"=1", snippetsRootEnv+"="+root,
		snippetsBinsEnv+"="+bins+string(filepath.ListSeparator)+examples)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the docs' snippets in a network namespace (unshare -rn, ip from iproute2): %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// snippetShell runs scripts with bash in a clean environment; what they
// leave running in the background is stopped when the test ends.
type snippetShell struct {
	t    *testing.T
	dir  string
	env  []string
	pgid []int
}

// newSnippetShell makes a working directory holding the shipped configs/
// and deploy/ (the snippets read configs/*.yaml and the chart, and write
// local/) and a PATH whose go runs the built binaries.
func newSnippetShell(t *testing.T, root, bins string) *snippetShell {
	dir, shim := t.TempDir(), t.TempDir()
	for _, d := range []string{"configs", "deploy"} {
		if err := os.Symlink(filepath.Join(root, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	goShim := `#!/bin/sh
# go run ./cmd/NAME ARGS..., go run ./docs/examples/NAME ARGS... and
# go run MODULE/NAME@VERSION ARGS... start the binaries built for the test.
[ "$1" = run ] || { echo "go: only go run is available here" >&2; exit 2; }
name=$(basename "${2%@*}"); shift 2
IFS=:; for d in $SNIPPETS_BINS; do [ -x "$d/$name" ] && exec "$d/$name" "$@"; done
echo "go: no binary $name" >&2; exit 2
`
	if err := os.WriteFile(filepath.Join(shim, "go"), []byte(goShim), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := &snippetShell{t: t, dir: dir, env: []string{
		"PATH=" + shim + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + t.TempDir(), "LANG=C.UTF-8", snippetsBinsEnv + "=" + bins,
	}}
	t.Cleanup(sh.stop)
	return sh
}

// start runs script with bash in the background until the test ends.
func (s *snippetShell) start(script string) {
	s.t.Helper()
	cmd := s.command(script)
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.pgid = append(s.pgid, cmd.Process.Pid)
	go cmd.Wait()
}

// command is bash -e running script in the shell's directory and
// environment, in a process group of its own, with its output in a file
// of the test's.
func (s *snippetShell) command(script string) *exec.Cmd {
	f, err := os.CreateTemp(s.t.TempDir(), "out")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { f.Close() })
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = s.dir, s.env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs script with bash -e to its end (at most two minutes) and
// returns its output; processes it started with & keep running. The
// output goes to a file, not a pipe: a pipe would make Wait wait for the
// background processes, and closing it would kill them on their next log
// line (SIGPIPE).
func (s *snippetShell) run(script string) string {
	s.t.Helper()
	cmd := s.command(script)
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.pgid = append(s.pgid, cmd.Process.Pid)
	var err error
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = fmt.Errorf("%v, killed after 2 minutes", <-done)
	}
	out, _ := os.ReadFile(cmd.Stdout.(*os.File).Name())
	if err != nil {
		s.t.Fatalf("bash: %v\n%s\nscript:\n%s", err, out, script)
	}
	return string(out)
}

// stop kills every process the scripts started and waits until the
// ports the docs use are free again.
func (s *snippetShell) stop() {
	for _, g := range s.pgid {
		syscall.Kill(-g, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, port := range []string{"6379", "9092", "8090", "8080", "8081", "8082"} {
		for time.Now().Before(deadline) {
			ln, err := net.Listen("tcp", "127.0.0.1:"+port)
			if err == nil {
				ln.Close()
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// viewerGetsMessage connects a viewer of room lobby at wsURL and checks
// that a message sent to logic on localhost:8090 (with token when not
// empty) reaches it.
func viewerGetsMessage(t *testing.T, wsURL, token, text string) {
	t.Helper()
	ws, _, err := wsviewer.TryDial(wsURL, nil)
	if err != nil {
		t.Fatalf("viewer %s: %v", wsURL, err)
	}
	defer ws.Close()
	if _, data, err := ws.NextRaw(10 * time.Second); err != nil || !strings.Contains(string(data), `"op":"welcome"`) {
		t.Fatalf("welcome: %s %v", data, err)
	}
	args := []string{"-s", "-XPOST", "localhost:8090/logic/send", "-H", "Content-Type: application/json",
		"-d", `{"roomId":"lobby","userId":7,"userName":"docs","messages":[{"content":"` + text + `"}]}`}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	if out, err := exec.Command("curl", args...).CombinedOutput(); err != nil || !bytes.Contains(out, []byte("msgIds")) {
		t.Fatalf("send: %v %s", err, out)
	}
	readMsgs(t, ws, text)
}

// readMsgs reads ws until a msgs frame holding text, for at most 30 s, and
// returns that frame.
func readMsgs(t *testing.T, ws *wsviewer.Conn, text string) string {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		_, data, err := ws.NextRaw(time.Until(end))
		if err != nil {
			t.Fatalf("the message %q did not reach the viewer: %v", text, err)
		}
		if s := string(data); strings.Contains(s, `"op":"msgs"`) && strings.Contains(s, text) {
			return s
		}
	}
}

// The Go program of docs/integrate.md is docs/examples/backend, as the
// snippets run it, and imports of this module only the public client
// package and the root's wire types: a backend in another module can use
// it as it is.
func TestDocGoExample(t *testing.T) {
	root := stack.Root(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs/integrate.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "docs/examples/backend/main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("```go\n"+string(src)+"```\n")) {
		t.Error("docs/integrate.md does not show docs/examples/backend/main.go as it is")
	}
	list := exec.Command("go", "list", "-deps", "./docs/examples/backend")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps ./docs/examples/backend: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/danmaku/danmaku", "github.com/danmaku/danmaku/client", "github.com/danmaku/danmaku/docs/examples/backend":
			continue
		}
		if strings.HasPrefix(dep, "github.com/danmaku/danmaku/") {
			t.Errorf("docs/examples/backend depends on %s, which is not the public client", dep)
		}
	}
}

// The shell recipe of docs/protocol.md mints a token the servers' verifier
// accepts, with the claims it shows.
func TestDocShellToken(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	cmd := exec.Command("bash", "-e", "-c", snippet(t, "..", "docs/protocol.md", "openssl-token"))
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SECRET=" + secret}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the recipe: %v\n%s", err, out)
	}
	v, err := auth.New(auth.Config{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(strings.TrimSpace(string(out)))
	if err != nil || c.UID != 42 || c.Name != "alice" || time.Until(c.ExpiresAt) < 59*time.Minute {
		t.Fatalf("the recipe's token %q: %+v %v", out, c, err)
	}
}
