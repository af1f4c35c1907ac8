package e2e_test

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// runBinary runs a built binary of cmd/ to its end in the module root and
// returns its output and exit status.
func runBinary(t *testing.T, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(stack.Binaries(t), name), args...)
	cmd.Dir = stack.Root(t)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%s %v still running after 30s; output %s%s", name, args, o.String(), e.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestConfigInitRolesWithAuth follows the path from the all-in-one binary
// to the role binaries with token authentication: "danmaku config init"
// writes the roles' files, "danmaku config check" accepts each, the role
// binaries start from them (only addresses given by flag), a token minted
// by "danmaku token" from logic's file is accepted by logic and by the
// comet, and a message sent with it reaches the viewer that holds it.
func TestConfigInitRolesWithAuth(t *testing.T) {
	dir := t.TempDir()
	if out, errs, code := runBinary(t, "danmaku", "config", "init", dir); code != 0 {
		t.Fatalf("config init: %d %s %s", code, out, errs)
	}
	for _, role := range []string{"logic", "job", "comet"} {
		out, errs, code := runBinary(t, "danmaku", "config", "check", filepath.Join(dir, role+".yaml"))
		if code != 0 || !strings.Contains(out, "valid configuration of "+role) {
			t.Fatalf("config check %s: %d %s %s", role, code, out, errs)
		}
	}
	if _, errs, code := runBinary(t, "danmaku", "config", "init", dir); code != 2 || !strings.Contains(errs, "exists") {
		t.Errorf("config init over existing files: %d %s", code, errs)
	}

	redis := redisserver.Standalone(t).Addr
	kafka := stack.DevKafka(t)
	logicAddr, cometAddr, cometInternal, jobAddr := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	logicP := start(t, "logic", "-config", filepath.Join(dir, "logic.yaml"), "-redis.addrs", redis, "-kafka.brokers", kafka,
		"-logic.listen", logicAddr)
	start(t, "job", "-config", filepath.Join(dir, "job.yaml"), "-redis.addrs", redis, "-kafka.brokers", kafka,
		"-job.metrics_addr", jobAddr)
	start(t, "comet", "-config", filepath.Join(dir, "comet.yaml"), "-redis.addrs", redis,
		"-comet.listen", cometAddr, "-comet.internal_listen", cometInternal)
	getOK(t, "http://"+logicAddr+"/readyz")
	getOK(t, "http://"+cometAddr+"/readyz")
	getOK(t, "http://"+jobAddr+"/readyz")

	room := testkit.Uniq("cli_")
	tok, errs, code := runBinary(t, "danmaku", "token", "-config", filepath.Join(dir, "logic.yaml"), "-uid", "42", "-name", "Ann", "-rooms", room)
	tok = strings.TrimSpace(tok)
	if code != 0 || strings.Count(tok, ".") != 2 {
		t.Fatalf("token: %d %q %s", code, tok, errs)
	}

	if _, resp, err := wsviewer.TryDial("ws://"+cometAddr+"/ws?room="+room, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("comet without a token: %v %v, want 401", resp, err)
	}
	ws, _, err := wsviewer.TryDial("ws://"+cometAddr+"/ws?room="+room+"&token="+tok, nil)
	if err != nil {
		t.Fatalf("comet with the minted token: %v", err)
	}
	defer ws.Close()
	if _, data, err := ws.NextRaw(10 * time.Second); err != nil || !strings.Contains(string(data), `"op":"welcome"`) {
		t.Fatalf("welcome: %s %v", data, err)
	}

	body := `{"roomId":"` + room + `","messages":[{"content":"with a minted token"}]}`
	send := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+logicAddr+"/logic/send", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, b := send(""); code != http.StatusUnauthorized {
		t.Fatalf("send without a token: %d %s, want 401", code, b)
	}
	if code, b := send(tok); code != http.StatusAccepted {
		t.Fatalf("send with the minted token: %d %s", code, b)
	}
	if s := readMsgs(t, ws, "with a minted token"); !strings.Contains(s, `"uid":42`) || !strings.Contains(s, `"name":"Ann"`) {
		t.Errorf("the message is not the token's user's: %s", s)
	}
	logicP.Stop(t)
}

// "danmaku config check FILE" gives the error, and the exit status, that
// the role binary gives when started with the file.
func TestConfigCheckAsTheRole(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name, role, file string
	}{
		{"shipped placeholder secret", "comet", "configs/comet.yaml"},
		{"shipped placeholder push secret", "job", "configs/job.yaml"},
		{"wrong type", "logic", write("logic.yaml", "logic:\n  rate_limit: fast\n")},
		{"unknown key", "job", write("job.yaml", "job:\n  windw: 1s\n  push_secret: a-secret-of-enough-bytes\n")},
		{"jwt without keys", "logic", write("jwt.yaml", "logic:\n  auth: jwt\n")},
		{"bad value", "comet", write("comet.yaml", "comet:\n  secret: a-secret-of-enough-bytes\n  lease_ttl: 1s\n")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, roleErr, roleCode := runBinary(t, c.role, "-config", c.file)
			out, checkErr, checkCode := runBinary(t, "danmaku", "config", "check", "-role", c.role, c.file)
			if roleCode != 2 || roleErr == "" {
				t.Fatalf("%s -config %s: exit %d, %q; want a configuration error", c.role, c.file, roleCode, roleErr)
			}
			if checkCode != roleCode || checkErr != roleErr || out != "" {
				t.Errorf("config check: exit %d, stderr %q, stdout %q\nthe role: exit %d, stderr %q", checkCode, checkErr, out, roleCode, roleErr)
			}
		})
	}
	// The shipped all-in-one file is valid as it is.
	if out, errs, code := runBinary(t, "danmaku", "config", "check", "configs/danmaku.yaml"); code != 0 {
		t.Errorf("config check configs/danmaku.yaml: %d %s %s", code, out, errs)
	}
}
