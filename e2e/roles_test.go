package e2e_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/job"
)

// TestRolesSeparately is the README's "Run the roles separately": the
// logic, job and comet binaries started from configs/*.yaml with only
// addresses overridden, a real redis-server and cmd/devkafka. A message
// sent to /logic/send arrives at a WebSocket viewer of the comet, the
// comet serves the page for logic's API, logic answers the page's
// preflight, and every binary stops cleanly on SIGTERM.
func TestRolesSeparately(t *testing.T) {
	redis := redisserver.Standalone(t).Addr
	kafka := stack.DevKafka(t)
	logicAddr, cometAddr, cometInternal, jobAddr := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	logicURL, cometURL := "http://"+logicAddr, "http://"+cometAddr
	shared := []string{"-redis.addrs", redis}
	// The shipped configs carry a placeholder push secret the binaries
	// refuse; a deployment passes its own, here by flag.
	secret := "roles-test-push-secret"

	logic := start(t, "logic", append(shared, "-config", "configs/logic.yaml", "-kafka.brokers", kafka,
		"-logic.listen", logicAddr, "-logic.allowed_origins", cometURL)...)
	jobP := start(t, "job", append(shared, "-config", "configs/job.yaml", "-kafka.brokers", kafka,
		"-job.metrics_addr", jobAddr, "-job.push_secret", secret)...)
	cometP := start(t, "comet", append(shared, "-config", "configs/comet.yaml",
		"-comet.listen", cometAddr, "-comet.internal_listen", cometInternal, "-page.api_base", logicURL,
		"-comet.secret", secret)...)

	getOK(t, logicURL+"/readyz")
	getOK(t, cometURL+"/healthz")
	if body := getOK(t, "http://"+jobAddr+"/healthz"); !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("job /healthz: %s", body)
	}
	if page := getOK(t, cometURL+"/"); !strings.Contains(string(page), `content="`+logicURL+`"`) {
		t.Errorf("the comet's page does not know logic's address:\n%.400s", page)
	}
	req, _ := http.NewRequest(http.MethodOptions, logicURL+"/logic/send", nil)
	req.Header.Set("Origin", cometURL)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent ||
		resp.Header.Get("Access-Control-Allow-Origin") != cometURL {
		t.Fatalf("preflight from the comet's page: %v %v", resp, err)
	}

	room := testkit.Uniq("roles_")
	ws := dialWelcome(t, "ws://"+cometAddr+"/ws", room)
	defer ws.Close()
	text := "from the role binaries"
	postJSON(t, logicURL+"/logic/send", `{"roomId":"`+room+`","userId":77,"userName":"roles","messages":[{"content":"`+text+`"}]}`)
	end := time.Now().Add(40 * time.Second)
	for {
		_, data, err := ws.NextRaw(time.Until(end))
		if err != nil {
			t.Fatalf("the message did not arrive: %v", err)
		}
		if strings.Contains(string(data), `"op":"msgs"`) && strings.Contains(string(data), text) {
			break
		}
	}
	if n := strings.Count(logic.Logs(), "senders are not authenticated"); n != 1 {
		t.Errorf("logic with auth off said %d times that senders are not authenticated, want once", n)
	}
	if !jobP.Logged("kafka partitions assigned") {
		t.Error("job did not log its partition assignment")
	}
	for _, p := range []*proc{logic, jobP, cometP} {
		p.Stop(t)
	}
	if !jobP.Logged("job stopped") {
		t.Error("job did not log its stop")
	}
}

// The shipped configs of job and comet agree on the push secret, so the
// role binaries started from them deliver.
func TestShippedConfigsAgreeOnTheSecret(t *testing.T) {
	var j struct {
		Job job.Config `yaml:"job"`
	}
	var c struct {
		Comet comet.Config `yaml:"comet"`
	}
	j.Job, c.Comet = job.DefaultConfig(), comet.DefaultConfig()
	if err := config.Load(&j, config.Options{Args: []string{"-config", "../configs/job.yaml"}}); err != nil {
		t.Fatal(err)
	}
	if err := config.Load(&c, config.Options{Args: []string{"-config", "../configs/comet.yaml"}}); err != nil {
		t.Fatal(err)
	}
	if j.Job.PushSecret != c.Comet.Secret {
		t.Fatalf("configs/job.yaml push_secret %q, configs/comet.yaml secret %q", j.Job.PushSecret, c.Comet.Secret)
	}
	if d, e := job.DefaultConfig().PushSecret, comet.DefaultConfig().Secret; d != e {
		t.Fatalf("defaults: job.push_secret %q, comet.secret %q", d, e)
	}
}

// TestQuickStart runs the README's quick start: the all-in-one binary with
// nothing configured serves the page, and the README's curl example is
// accepted and counted.
func TestQuickStart(t *testing.T) {
	addr := testkit.FreeAddr(t)
	p := start(t, "danmaku", "-logic.listen", addr)
	if page := getOK(t, "http://"+addr+"/"); !strings.Contains(string(page), "danmaku.js") {
		t.Fatalf("GET /: %.200s", page)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`curl -s -XPOST localhost:8090/logic/send -H 'Content-Type: application/json' \\\n\s+-d '([^']+)'`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README lacks the curl example of /logic/send")
	}
	if body := postJSON(t, "http://"+addr+"/logic/send", string(m[1])); !strings.Contains(string(body), `"msgIds"`) {
		t.Fatalf("send: %s", body)
	}
	if body := getOK(t, "http://"+addr+"/logic/online?roomId=lobby"); !strings.Contains(string(body), `"online":0`) {
		t.Fatalf("online: %s", body)
	}
	p.Stop(t)
}

// Every line a role writes is a JSON object, also while Redis is down:
// the Redis client's own complaints (a failed dial for each request) go
// through the role's logger, sampled, instead of plain text on stderr.
func TestRedisClientLogsAsJSON(t *testing.T) {
	srv := redisserver.New(t)
	logicAddr := testkit.FreeAddr(t)
	logic := start(t, "logic", "-config", "configs/logic.yaml", "-redis.addrs", srv.Addr,
		"-kafka.brokers", stack.DevKafka(t), "-logic.listen", logicAddr)
	getOK(t, "http://"+logicAddr+"/readyz")
	srv.Kill()
	body := `{"roomId":"json-logs","userId":7,"userName":"j","messages":[{"content":"hi"}]}`
	var seen map[string]any
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		resp, err := http.Post("http://"+logicAddr+"/logic/send", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("send with Redis down: %d, want 503", resp.StatusCode)
		}
		for _, l := range logic.LogLines() {
			if l["logger"] == "redis" && l["level"] == "warn" && strings.Contains(fmt.Sprint(l["msg"]), "connection refused") {
				seen = l
				return nil
			}
		}
		return errors.New("no warn line of logger redis about the refused dial yet")
	})
	t.Logf("the client's line: %v", seen)
	for _, line := range strings.Split(strings.TrimSpace(logic.Logs()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("logic wrote a line that is not a JSON object: %q", line)
		}
	}
}
