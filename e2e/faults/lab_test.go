//go:build faults

package faults_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/netlab"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// Ports of the roles on their hosts.
const (
	redisPort    = 6379
	kafkaPort    = 9092
	logicPort    = 8090
	cometPublic  = 8080
	cometPush    = 8081
	jobMetrics   = 8082
	redisViaPort = 6390 // the client host's relay to Redis (proxied jobs)
)

// Canary settings of every lab stack: a canary every 250 ms, a comet
// unready once a partition's newest is 3 s old.
const (
	canaryInterval = 250 * time.Millisecond
	canaryMaxAge   = 3 * time.Second
	partitions     = 16 // kafka.partitions of configs/logic.yaml
)

// labOptions shape a labStack.
type labOptions struct {
	Comets, Jobs int
	// JobsViaProxy makes the jobs reach Redis through a relay on the
	// client host (labStack.RedisProxy), whose delay a test sets.
	JobsViaProxy      bool
	Logic, Job, Comet []string // extra flags
}

// labStack is the service on hosts of a lab: svc (redis-server and
// devkafka), logic, jobN and cometN, each role a process of its own.
type labStack struct {
	lab                *netlab.Lab
	svc, logicH        *netlab.Host
	jobHosts, cometHs  []*netlab.Host
	Redis, Kafka       *stack.Proc
	Logic              *stack.Proc
	Jobs, Comets       []*stack.Proc
	RedisProxy         *netlab.Proxy
	st                 *stack.Stack // for Send: only LogicURL is set
	LogicURL, RedisURL string
}

// redisBinary is the redis-server the tests start (DANMAKU_TEST_REDIS_SERVER
// as for package redisserver, else redis-server).
func redisBinary(t testing.TB) string {
	name := os.Getenv("DANMAKU_TEST_REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: %v", name, err)
	}
	p, _ = filepath.Abs(p)
	return p
}

func newLabStack(t *testing.T, o labOptions) *labStack {
	t.Helper()
	if o.Comets == 0 {
		o.Comets = 2
	}
	if o.Jobs == 0 {
		o.Jobs = 1
	}
	began := time.Now()
	l := netlab.New(t)
	s := &labStack{lab: l, svc: l.Host("svc"), logicH: l.Host("logic")}
	for i := range o.Comets {
		s.cometHs = append(s.cometHs, l.Host(fmt.Sprintf("comet%d", i)))
	}
	for i := range o.Jobs {
		s.jobHosts = append(s.jobHosts, l.Host(fmt.Sprintf("job%d", i)))
	}
	cfg := configCopies(t)
	redisAddr, kafkaAddr := s.svc.Addr(redisPort), s.svc.Addr(kafkaPort)
	s.RedisURL = redisAddr
	s.Redis = stack.StartWrapped(t, s.svc.Wrap(), redisBinary(t), nil, "--bind", s.svc.IP, "--port", strconv.Itoa(redisPort),
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	s.Kafka = stack.StartWrapped(t, s.svc.Wrap(), "devkafka", nil, "-addr", kafkaAddr, "-data", t.TempDir())
	s.LogicURL = "http://" + s.logicH.Addr(logicPort)
	s.st = &stack.Stack{LogicURL: s.LogicURL}
	s.Logic = stack.StartWrapped(t, s.logicH.Wrap(), "logic", nil, append([]string{"-config", cfg("logic"),
		"-redis.addrs", redisAddr, "-kafka.brokers", kafkaAddr, "-logic.listen", s.logicH.Addr(logicPort),
		"-logic.rate_limit", "100000", "-logic.rate_burst", "100000", "-logic.ip_rate_limit", "0",
		"-logic.canary_interval", canaryInterval.String()}, o.Logic...)...)
	for i, h := range s.cometHs {
		s.Comets = append(s.Comets, stack.StartWrapped(t, h.Wrap(), "comet", nil, append(append([]string{"-config", cfg("comet"),
			"-redis.addrs", redisAddr, "-comet.id", fmt.Sprintf("comet%d", i),
			"-comet.listen", h.Addr(cometPublic), "-comet.internal_listen", h.Addr(cometPush), "-comet.advertise", h.Addr(cometPush),
			"-comet.canary_max_age", canaryMaxAge.String()}, stack.CometFlags()...), o.Comet...)...))
	}
	jobRedis := redisAddr
	if o.JobsViaProxy {
		s.RedisProxy = netlab.NewProxy(t, l.Client().Addr(redisViaPort), redisAddr)
		jobRedis = s.RedisProxy.Addr()
	}
	for _, h := range s.jobHosts {
		s.Jobs = append(s.Jobs, stack.StartWrapped(t, h.Wrap(), "job", nil, append(append([]string{"-config", cfg("job"),
			"-redis.addrs", jobRedis, "-kafka.brokers", kafkaAddr, "-job.metrics_addr", h.Addr(jobMetrics)},
			stack.JobFlags()...), o.Job...)...))
	}
	s.waitServing(t)
	s.waitCanaryGreen(t, 60*time.Second)
	t.Logf("lab stack of %d comets and %d jobs up in %v", o.Comets, o.Jobs, time.Since(began).Round(time.Millisecond))
	return s
}

// configCopies copies configs/ as the binaries were built with it, so a
// role restarted by a long test (the soak) reads the configuration of its
// build even when the tree changes meanwhile; it returns the path of a
// role's copy.
func configCopies(t *testing.T) func(role string) string {
	t.Helper()
	dir := t.TempDir()
	for _, role := range []string{"logic", "comet", "job"} {
		b, err := os.ReadFile(filepath.Join(stack.Root(t), "configs", role+".yaml"))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, role+".yaml"), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return func(role string) string { return filepath.Join(dir, role+".yaml") }
}

// waitServing waits until every role answers /healthz.
func (s *labStack) waitServing(t *testing.T) {
	t.Helper()
	urls := []string{s.LogicURL + "/readyz"}
	for _, h := range s.cometHs {
		urls = append(urls, "http://"+h.Addr(cometPublic)+"/healthz")
	}
	for _, h := range s.jobHosts {
		urls = append(urls, "http://"+h.Addr(jobMetrics)+"/readyz")
	}
	testkit.SucceedsSoon(t, 60*time.Second, func() error {
		for _, u := range urls {
			if code, body := get(u); code != http.StatusOK {
				return fmt.Errorf("%s: %d %s", u, code, body)
			}
		}
		return nil
	})
}

// CometWS is comet i's WebSocket URL.
func (s *labStack) CometWS(i int) string { return "ws://" + s.cometHs[i].Addr(cometPublic) + "/ws" }

// CometReadyz and CometMetrics are comet i's URLs.
func (s *labStack) CometReadyz(i int) string {
	return "http://" + s.cometHs[i].Addr(cometPublic) + "/readyz"
}
func (s *labStack) CometMetrics(i int) string {
	return "http://" + s.cometHs[i].Addr(cometPush) + "/metrics"
}

// JobMetrics is job i's /metrics URL.
func (s *labStack) JobMetrics(i int) string {
	return "http://" + s.jobHosts[i].Addr(jobMetrics) + "/metrics"
}

// Viewer connects a resuming viewer of room to comet i (then the others
// in order, should it have to reconnect).
func (s *labStack) Viewer(t *testing.T, room string, i int) *wsviewer.Viewer {
	t.Helper()
	urls := []string{s.CometWS(i)}
	for k := range s.cometHs {
		if k != i {
			urls = append(urls, s.CometWS(k))
		}
	}
	return wsviewer.Dial(t, room, urls...)
}

// Send posts n messages to room at rate a second (stack.Sender).
func (s *labStack) Send(t *testing.T, room string, n int, rate float64) *stack.Sender {
	return s.st.Send(t, room, n, rate)
}

// noRestarts fails t if any role process exited: the faults must heal
// without a restart.
func (s *labStack) noRestarts(t *testing.T) {
	t.Helper()
	procs := append([]*stack.Proc{s.Logic}, append(s.Jobs, s.Comets...)...)
	for _, p := range procs {
		select {
		case <-p.Done():
			t.Errorf("%s exited during the fault: %v", p.Name, p.Err())
		default:
		}
	}
}

// onlyRefused checks that every refused send was a documented refusal:
// 503 unavailable.
func onlyRefused(t *testing.T, sd *stack.Sender) int {
	t.Helper()
	errs := sd.Refusals()
	for _, err := range errs {
		if !strings.HasPrefix(err.Error(), "send: 503 ") || !strings.Contains(err.Error(), `"unavailable"`) {
			t.Errorf("a send was refused with %v, want only 503 unavailable", err)
		}
	}
	return len(errs)
}

// get returns the status and body of GET url (0 when it does not answer).
func get(url string) (int, string) { return stack.Status(url) }

// waitCanaryGreen waits until every comet reports every partition's
// canary at most 1 s old and answers /readyz 200, and the jobs push every
// partition's canary.
func (s *labStack) waitCanaryGreen(t *testing.T, d time.Duration) {
	t.Helper()
	testkit.SucceedsSoon(t, d, func() error {
		for i := range s.cometHs {
			if err := s.cometGreen(i); err != nil {
				return err
			}
		}
		var urls []string
		for i := range s.jobHosts {
			urls = append(urls, s.JobMetrics(i))
		}
		return stack.JobsCanaryFresh(urls, partitions, time.Second)
	})
}

// cometGreen reports an error unless comet i's canaries are fresh and its
// /readyz says 200.
func (s *labStack) cometGreen(i int) error {
	if err := stack.CanaryFresh(s.CometMetrics(i), stack.CometCanaryAge, partitions, time.Second); err != nil {
		return err
	}
	if code, body := get(s.CometReadyz(i)); code != http.StatusOK {
		return fmt.Errorf("comet%d readyz %d %s", i, code, body)
	}
	return nil
}

// waitCanaryRed waits until comet i's oldest canary is older than
// canaryMaxAge and its /readyz says 503, and returns how long after since
// that was seen.
func (s *labStack) waitCanaryRed(t *testing.T, i int, since time.Time, d time.Duration) time.Duration {
	t.Helper()
	testkit.SucceedsSoon(t, d, func() error {
		if code, body := get(s.CometReadyz(i)); code != http.StatusServiceUnavailable {
			return fmt.Errorf("comet%d readyz %d %s, want 503", i, code, body)
		}
		ages, err := stack.CanaryAges(s.CometMetrics(i), stack.CometCanaryAge)
		if err != nil {
			return err
		}
		oldest := 0.0
		for _, a := range ages {
			oldest = max(oldest, a)
		}
		if oldest <= canaryMaxAge.Seconds() {
			return fmt.Errorf("comet%d oldest canary %.2f s, want over %v", i, oldest, canaryMaxAge)
		}
		return nil
	})
	return time.Since(since)
}
