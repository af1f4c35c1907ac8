package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// roles is logic, job and comet started from configs/*.yaml against the
// given Redis and Kafka addresses.
type roles struct {
	logic, job, comet                   *proc
	logicURL, jobURL, cometURL, cometWS string
	cometMetrics                        string
}

func startRoles(t *testing.T, redis, kafka string) *roles {
	t.Helper()
	const secret = "deps-down-push-secret"
	r := &roles{}
	logicAddr, jobAddr, cometAddr, cometInternal := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	r.logicURL, r.jobURL, r.cometURL = "http://"+logicAddr, "http://"+jobAddr, "http://"+cometAddr
	r.cometWS = "ws://" + cometAddr + "/ws"
	r.cometMetrics = "http://" + cometInternal + "/metrics"
	r.logic = start(t, "logic", "-config", "configs/logic.yaml", "-redis.addrs", redis, "-kafka.brokers", kafka,
		"-logic.listen", logicAddr)
	r.job = start(t, "job", "-config", "configs/job.yaml", "-redis.addrs", redis, "-kafka.brokers", kafka,
		"-job.metrics_addr", jobAddr, "-job.push_secret", secret, "-job.comet_refresh", "200ms", "-job.window", "100ms")
	r.comet = start(t, "comet", "-config", "configs/comet.yaml", "-redis.addrs", redis,
		"-comet.listen", cometAddr, "-comet.internal_listen", cometInternal, "-comet.secret", secret,
		"-comet.lease_renew", "300ms", "-comet.lease_ttl", "2s")
	return r
}

func (r *roles) procs() []*proc { return []*proc{r.logic, r.job, r.comet} }

func (r *roles) bases() []string { return []string{r.logicURL, r.jobURL, r.cometURL} }

func (r *roles) metrics() []string {
	return []string{r.logicURL + "/metrics", r.jobURL + "/metrics", r.cometMetrics}
}

// status is the status of GET url, 0 when it does not answer.
func status(url string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitStatus waits until GET url answers want.
func waitStatus(t *testing.T, d time.Duration, url string, want int) {
	t.Helper()
	testkit.SucceedsSoon(t, d, func() error {
		if s := status(url); s != want {
			return fmt.Errorf("%s: %d, want %d", url, s, want)
		}
		return nil
	})
}

// notReadyButAlive checks that each role of bases answers /healthz 200
// within a few seconds of its start, /readyz 503 and metrics 200.
func notReadyButAlive(t *testing.T, bases, metrics []string) {
	t.Helper()
	began := time.Now()
	for _, base := range bases {
		waitStatus(t, 10*time.Second, base+"/healthz", http.StatusOK)
		if s := status(base + "/readyz"); s != http.StatusServiceUnavailable {
			t.Errorf("%s/readyz with a dependency down: %d, want 503", base, s)
		}
	}
	if d := time.Since(began); d > 8*time.Second {
		t.Errorf("health took %v to answer", d)
	}
	for _, u := range metrics {
		if s := status(u); s != http.StatusOK {
			t.Errorf("%s with a dependency down: %d", u, s)
		}
	}
}

// dialWelcome opens a viewer of room and reads its welcome, which comes
// once the viewer is registered (a message sent before that finds no comet
// for the room).
func dialWelcome(t *testing.T, wsURL, room string) *wsviewer.Conn {
	t.Helper()
	ws, _, err := wsviewer.TryDial(wsURL+"?room="+room, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, data, err := ws.NextRaw(10 * time.Second); err != nil || !strings.Contains(string(data), `"op":"welcome"`) {
		t.Fatalf("welcome: %s %v", data, err)
	}
	return ws
}

// deliver waits until every role is ready and a message sent through logic
// reaches a viewer of the comet.
func (r *roles) deliver(t *testing.T) {
	t.Helper()
	for _, base := range r.bases() {
		waitStatus(t, 40*time.Second, base+"/readyz", http.StatusOK)
	}
	room := testkit.Uniq("deps_")
	ws := dialWelcome(t, r.cometWS, room)
	defer func() { ws.Close() }()
	// The job may still be joining its group: send until one arrives.
	deadline := time.Now().Add(40 * time.Second)
	for i := 0; ; i++ {
		text := fmt.Sprintf("after the outage %d", i)
		postJSON(t, r.logicURL+"/logic/send", `{"roomId":"`+room+`","userId":7,"userName":"d","messages":[{"content":"`+text+`"}]}`)
		end := time.Now().Add(3 * time.Second)
		for {
			_, data, err := ws.NextRaw(time.Until(end))
			if err != nil {
				break
			}
			if strings.Contains(string(data), "after the outage") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no message reached the viewer after the dependency came up")
		}
		ws.Close()
		ws = dialWelcome(t, r.cometWS, room)
	}
}

// The roles serve /healthz and /metrics at once while Kafka or Redis does
// not answer, say 503 on /readyz until it does, exit 0 on SIGTERM in the
// meantime, and turn ready and deliver once it comes up, as an
// orchestrator expects of them.
func TestRolesWhileDependencyDown(t *testing.T) {
	t.Run("kafka", func(t *testing.T) {
		redis := redisserver.Standalone(t).Addr
		kafka := testkit.FreeAddr(t) // nothing listens there yet
		r := startRoles(t, redis, kafka)
		// The comet needs no Kafka: it is ready; logic and job are not.
		waitStatus(t, 10*time.Second, r.cometURL+"/readyz", http.StatusOK)
		notReadyButAlive(t, []string{r.logicURL, r.jobURL}, []string{r.logicURL + "/metrics", r.jobURL + "/metrics"})
		r.logic.Stop(t) // exit status 0 while Kafka is down
		r.job.Stop(t)
		r.logic.Restart(t)
		r.job.Restart(t)
		stack.Start(t, "devkafka", nil, "-addr", kafka)
		r.deliver(t)
		for _, p := range r.procs() {
			p.Stop(t)
		}
	})
	t.Run("redis", func(t *testing.T) {
		redis := redisserver.New(t)
		redis.Kill() // its address answers nothing until Restart
		r := startRoles(t, redis.Addr, stack.DevKafka(t))
		notReadyButAlive(t, r.bases(), r.metrics())
		for _, p := range r.procs() {
			p.Stop(t) // exit status 0 while Redis is down
			p.Restart(t)
		}
		notReadyButAlive(t, r.bases(), r.metrics())
		if err := redis.Restart(); err != nil {
			t.Fatal(err)
		}
		r.deliver(t)
		for _, p := range r.procs() {
			p.Stop(t)
		}
	})
}
