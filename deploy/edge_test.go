package deploy_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// startEdge runs nginx with deploy/nginx.conf as docker-compose mounts it,
// with only the addresses changed: the upstream servers become the stack's
// logic and comets, the listen port a free one, the page's root
// web/static, logic's admin listener adminAddr. It returns the edge's base
// URL. A missing nginx fails the
// test (Debian: apt-get install nginx).
func startEdge(t *testing.T, s *stack.Stack, adminAddr string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Fatalf("nginx not found (Debian: apt-get install nginx): %v", err)
		}
	}
	src, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	static, err := filepath.Abs("../web/static")
	if err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	conf := string(src)
	for from, to := range map[string]string{
		`server comet-1:8080 `:        "server " + s.Comets[0].Public + " ",
		`server comet-2:8080 `:        "server " + s.Comets[1].Public + " ",
		`server logic:8090;`:          "server " + strings.TrimPrefix(s.LogicURL, "http://") + ";",
		`server logic:8091;`:          "server " + adminAddr + ";",
		`listen 8000;`:                "listen " + addr + ";",
		`root /usr/share/nginx/html;`: "root " + static + ";",
	} {
		if !strings.Contains(conf, from) {
			t.Fatalf("nginx.conf has no %q to point at the test's processes", from)
		}
		conf = strings.ReplaceAll(conf, from, to)
	}
	// The workers may run as another user: a prefix they can use.
	prefix := t.TempDir()
	os.Chmod(prefix, 0o777)
	// Logs the configuration writes go to the prefix.
	conf = regexp.MustCompile(`(access_log|error_log)\s+/\S+`).ReplaceAllString(conf, "$1 "+prefix+"/$1.log")
	if err := os.WriteFile(filepath.Join(prefix, "default.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	main := fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log stderr warn;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/default.conf;
}
`, prefix)
	mainPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(mainPath, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-p", prefix, "-c", mainPath).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-p", prefix, "-c", mainPath, "-g", "daemon off; master_process off;")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("nginx:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		_, _, err := get(base + "/")
		return err
	})
	return base
}

var client = &http.Client{Timeout: 10 * time.Second}

func get(url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

func post(url, auth, body string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b), nil
}

// TestEdge runs the compose edge (deploy/nginx.conf under a real nginx) in
// front of the role binaries: the page, its /metrics link, sends and /ws
// get through; the admin API and the notice routes do not, whatever the
// spelling of the path, although logic itself takes the same requests with
// the secret.
func TestEdge(t *testing.T) {
	const secret = "edge-test-admin-secret"
	adminAddr := testkit.FreeAddr(t)
	s := stack.New(t, stack.Options{Comets: 2, Logic: []string{"-logic.admin_secret", secret, "-logic.admin_addr", adminAddr}})
	edge := startEdge(t, s, adminAddr)
	admin := "http://" + adminAddr

	if code, body, err := get(edge + "/edge/healthz"); err != nil || code != 200 {
		t.Errorf("the edge's health check: %d %v %.200s", code, err, body)
	}
	if code, body, err := get(edge + "/"); err != nil || code != 200 || !strings.Contains(body, "danmaku") {
		t.Errorf("page through the edge: %d %v %.200s", code, err, body)
	}
	if code, body, err := get(edge + "/metrics"); err != nil || code != 200 || !strings.Contains(body, "danmaku_logic_messages_accepted_total") {
		t.Errorf("/metrics through the edge: %d %v %.200s", code, err, body)
	}
	if code, _, err := post(edge+"/metrics", "", "{}"); err != nil || code != http.StatusForbidden {
		t.Errorf("POST /metrics through the edge: %d %v, want 403", code, err)
	}

	room := testkit.Uniq("edge_")
	v := wsviewer.Dial(t, room, strings.Replace(edge, "http://", "ws://", 1)+"/ws")
	ids, err := stack.Post(edge, room, 7, "edge", []string{"through the edge"})
	if err != nil {
		t.Fatalf("send through the edge: %v", err)
	}
	wsviewer.Delivered(t, 20*time.Second, ids, v)

	mute := `{"userId":99,"roomId":"` + room + `","duration":"1m","actor":"edge-test"}`
	refused := map[string]string{
		"/logic/admin/mute":         mute,
		"/logic//admin/mute":        mute,
		"/logic/./admin/mute":       mute,
		"/logic/%61dmin/mute":       mute,
		"/logic/x/../admin/mute":    mute,
		"/logic/admin/words/reload": "",
		"/logic/push/user":          `{"userId":99,"messages":[{"content":"x"}]}`,
		"/logic/broadcast":          `{"messages":[{"content":"x"}]}`,
	}
	for path, body := range refused {
		code, resp, err := post(edge+path, secret, body)
		if err != nil || code != http.StatusNotFound {
			t.Errorf("POST %s through the edge with the admin secret: %d %v %.200s, want 404", path, code, err, resp)
		}
	}
	if code, resp, err := post(admin+"/logic/admin/mute", secret, mute); err != nil || code != 200 {
		t.Fatalf("the same mute on logic itself: %d %v %.200s", code, err, resp)
	}
	// Nothing the edge was sent reached logic's admin API: only the direct
	// request is counted.
	_, metrics, err := get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^danmaku_logic_admin_actions_total\{([^}]*)\} (\S+)$`)
	total := 0.0
	for _, m := range re.FindAllStringSubmatch(metrics, -1) {
		var f float64
		fmt.Sscan(m[2], &f)
		total += f
	}
	if total != 1 {
		t.Errorf("logic counted %v admin requests, want 1 (the direct one):\n%s", total, strings.Join(re.FindAllString(metrics, -1), "\n"))
	}
}
