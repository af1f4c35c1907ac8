package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit/wsviewer"

	"github.com/danmaku/danmaku/internal/tools/promtext"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// Options shape a Stack. Extra flags come after the defaults, so a flag
// given here wins.
type Options struct {
	Comets int // comets to start; default 2
	Jobs   int // jobs to start; default 1

	Logic, Job, Comet []string // extra flags of every logic, job, comet
	// CometEnv adds environment variables to every comet. Knobs a comet may
	// not know go here: an unknown DANMAKU_ variable is a warning, where an
	// unknown flag stops the binary.
	CometEnv []string
	// NoWarmUp returns as soon as every process serves, without checking
	// that a message gets through (for a stack that must not deliver).
	NoWarmUp bool
	// Cluster, when set, runs the stack on a Redis Cluster of its own
	// (redisserver.NewCluster) instead of a standalone server; every role
	// is given the address of every node.
	Cluster *redisserver.ClusterSpec
}

// Stack is one running service: its own redis-server (or Redis Cluster)
// and devkafka, one logic, Options.Jobs jobs and Options.Comets comets.
type Stack struct {
	Redis   *redisserver.Server  // nil on a cluster
	Cluster *redisserver.Cluster // nil on a standalone server
	Kafka   string
	// KafkaProc is the devkafka process serving Kafka (to pause or kill).
	KafkaProc *Proc
	Logic     *Proc
	LogicURL  string
	Jobs      []*Job
	Comets    []*Comet

	rdb redis.UniversalClient
}

// Comet is one comet process with its id and addresses.
type Comet struct {
	*Proc
	ID       string
	Public   string // host:port of /ws
	Internal string // host:port of /push and /metrics
}

// Job is one job process with the address of its /metrics and /healthz.
type Job struct {
	*Proc
	Metrics string // host:port
}

// WS is the comet's WebSocket URL (without query).
func (c *Comet) WS() string { return "ws://" + c.Public + "/ws" }

// Timings of the stack: short enough that a fault heals within a test,
// long enough for a loaded 2-core machine.
const (
	Window     = 150 * time.Millisecond // job.window
	LeaseRenew = 500 * time.Millisecond // comet.lease_renew
	LeaseTTL   = 2 * time.Second        // comet.lease_ttl
	// ReconcileInterval is comet.reconcile_interval.
	ReconcileInterval = 500 * time.Millisecond
	// JanitorInterval is job.janitor_interval.
	JanitorInterval = time.Second
)

// PushSecret is the stack's job.push_secret and comet.secret: the role
// binaries refuse the shipped placeholder.
const PushSecret = "stack-push-secret"

// New starts a stack and returns once a message sent through logic reaches
// a viewer of every comet.
func New(tb testing.TB, o Options) *Stack {
	tb.Helper()
	if o.Comets == 0 {
		o.Comets = 2
	}
	if o.Jobs == 0 {
		o.Jobs = 1
	}
	began := time.Now()
	s := &Stack{}
	s.startRedis(tb, o)
	s.KafkaProc, s.Kafka = StartDevKafka(tb)
	logic := launch(tb, "logic", nil, func() []string {
		addr := testkit.FreeAddr(tb)
		s.LogicURL = "http://" + addr
		return append([]string{"-config", "configs/logic.yaml",
			"-redis.addrs", s.RedisAddrs(), "-kafka.brokers", s.Kafka, "-logic.listen", addr,
			"-logic.rate_limit", "100000", "-logic.rate_burst", "100000",
			// Every sender of a test is 127.0.0.1: no per-address limit.
			"-logic.ip_rate_limit", "0"}, o.Logic...)
	}, func() string { return s.LogicURL + "/readyz" })
	s.Logic = logic.Proc
	children := []*child{logic}
	for i := 0; i < o.Comets; i++ {
		c, ch := s.launchComet(tb, o, i)
		s.Comets = append(s.Comets, c)
		children = append(children, ch)
	}
	for i := 0; i < o.Jobs; i++ {
		j, ch := s.launchJob(tb, o)
		s.Jobs = append(s.Jobs, j)
		children = append(children, ch)
	}
	for _, ch := range children {
		ch.wait(tb)
	}
	if !o.NoWarmUp {
		s.warmUp(tb)
	}
	tb.Logf("stack of %d comets and %d jobs up in %v", o.Comets, o.Jobs, time.Since(began).Round(time.Millisecond))
	return s
}

// startRedis starts the stack's standalone server or cluster and a client
// of it.
func (s *Stack) startRedis(tb testing.TB, o Options) {
	if o.Cluster == nil {
		s.Redis = redisserver.New(tb)
		s.rdb = redis.NewClient(&redis.Options{Addr: s.Redis.Addr, MaxRetries: -1})
	} else {
		s.Cluster = redisserver.NewCluster(tb, *o.Cluster)
		s.rdb = route.Dial(config.Redis{Addrs: s.Cluster.Addrs, DialTimeout: 300 * time.Millisecond,
			ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 8, BufferSize: 4096})
	}
	tb.Cleanup(func() { s.rdb.Close() })
}

// RedisAddrs is the roles' redis.addrs: the standalone server, or every
// node of the cluster.
func (s *Stack) RedisAddrs() string {
	if s.Cluster != nil {
		return strings.Join(s.Cluster.Addrs, ",")
	}
	return s.Redis.Addr
}

func (s *Stack) launchComet(tb testing.TB, o Options, i int) (*Comet, *child) {
	c := &Comet{ID: testkit.Uniq(fmt.Sprintf("comet%d-", i))}
	ch := launch(tb, "comet", o.CometEnv, func() []string {
		c.Public, c.Internal = testkit.FreeAddr(tb), testkit.FreeAddr(tb)
		return append([]string{"-config", "configs/comet.yaml",
			"-redis.addrs", s.RedisAddrs(), "-comet.id", c.ID,
			"-comet.listen", c.Public, "-comet.internal_listen", c.Internal,
		}, append(CometFlags(), o.Comet...)...)
	}, func() string { return "http://" + c.Public + "/healthz" })
	c.Proc = ch.Proc
	return c, ch
}

func (s *Stack) launchJob(tb testing.TB, o Options) (*Job, *child) {
	j := &Job{}
	ch := launch(tb, "job", nil, func() []string {
		j.Metrics = testkit.FreeAddr(tb)
		return append([]string{"-config", "configs/job.yaml",
			"-redis.addrs", s.RedisAddrs(), "-kafka.brokers", s.Kafka, "-job.metrics_addr", j.Metrics,
		}, append(JobFlags(), o.Job...)...)
	}, func() string { return "http://" + j.Metrics + "/readyz" }) // ready: consuming
	j.Proc = ch.Proc
	return j, ch
}

// CometFlags are the flags of every comet of a stack besides its Redis,
// id and addresses: the push secret and the stack's short timings.
func CometFlags() []string {
	return []string{"-comet.secret", PushSecret,
		"-comet.lease_renew", LeaseRenew.String(), "-comet.lease_ttl", LeaseTTL.String(),
		"-comet.reconcile_interval", ReconcileInterval.String(), "-comet.redis_timeout", "500ms", "-comet.online_period", "500ms", "-comet.max_conns_per_ip", "0"}
}

// JobFlags are the flags of every job of a stack besides its Redis, Kafka
// and metrics addresses: the push secret and the stack's short timings.
func JobFlags() []string {
	return []string{"-job.window", Window.String(), "-job.comet_refresh", "200ms", "-job.janitor_interval", JanitorInterval.String(),
		"-job.push_timeout", "500ms", "-job.push_attempts", "1", "-job.quarantine", "1s",
		"-job.push_secret", PushSecret,
		"-job.retry_min", "50ms", "-job.retry_max", "500ms", "-job.lock_retry", "20ms",
		"-job.redis_timeout", "500ms", "-job.lock_renew_timeout", "500ms",
		"-job.comet_refresh_timeout", "500ms", "-job.commit_interval", "100ms",
		"-job.session_timeout", "2s", "-job.heartbeat_interval", "300ms", "-job.rebalance_timeout", "2s",
		// 10 s of history at 500 msg/s: a resume slowed down by a loaded
		// machine still finds what it missed.
		"-job.history_size", "5000",
	}
}

// warmUp waits until a message sent through logic reaches a viewer on
// every comet: job has its partitions and sees every comet's lease.
func (s *Stack) warmUp(tb testing.TB) {
	tb.Helper()
	room := testkit.Uniq("warmup-")
	var vs []*wsviewer.Viewer
	for _, c := range s.Comets {
		v := s.Viewer(tb, room, c)
		defer v.Close()
		vs = append(vs, v)
	}
	// A message sent before job reads the room's comets reaches none of
	// them; send again until one arrives everywhere.
	testkit.SucceedsSoon(tb, 40*time.Second, func() error {
		ids, err := s.post(room, "warm-up", 1)
		if err != nil {
			return err
		}
		return testkit.Soon(2*time.Second, func() error {
			for _, v := range vs {
				if miss := v.Missing(ids); len(miss) > 0 {
					return fmt.Errorf("viewer on %s has not shown %v", v.Room, miss)
				}
			}
			return nil
		})
	})
}

// Viewer connects a viewer of room to comets (the first one first; a
// reconnect moves on to the next) and waits for its welcome.
func (s *Stack) Viewer(tb testing.TB, room string, comets ...*Comet) *wsviewer.Viewer {
	tb.Helper()
	v := s.ViewerAsync(tb, room, comets...)
	v.WaitWelcomes(tb, 1, 15*time.Second)
	return v
}

// ViewerAsync is Viewer without waiting for the welcome.
func (s *Stack) ViewerAsync(tb testing.TB, room string, comets ...*Comet) *wsviewer.Viewer {
	tb.Helper()
	var urls []string
	for _, c := range comets {
		urls = append(urls, c.WS())
	}
	return wsviewer.DialAsync(tb, room, urls...)
}

// RestartComet starts comet i again, with the same id and addresses,
// after it was killed or stopped, and waits until it serves.
func (s *Stack) RestartComet(tb testing.TB, i int) {
	tb.Helper()
	c := s.Comets[i]
	c.Restart(tb)
	waitServing(tb, c.Proc, "http://"+c.Public+"/healthz")
}

// Online is GET /logic/online of room.
func (s *Stack) Online(room string) (int64, error) {
	resp, err := httpClient.Get(s.LogicURL + "/logic/online?roomId=" + room)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("online: %d %s", resp.StatusCode, body)
	}
	var o struct {
		Online int64 `json:"online"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return 0, fmt.Errorf("online: %v: %s", err, body)
	}
	return o.Online, nil
}

// RDB returns a client of the stack's Redis (a cluster client on a
// cluster), for looking at keys. It reconnects after a restart.
func (s *Stack) RDB() redis.UniversalClient { return s.rdb }

// Keys returns the keys matching pattern (SCAN of every master, for small
// test data sets).
func (s *Stack) Keys(pattern string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	err := redisserver.ForEachMaster(ctx, s.rdb, scan)
	return keys, err
}

// Metric returns the value of one series of the /metrics page at
// http://addr/metrics, series written as exposed, for example
// `danmaku_comet_registry_repairs_total{kind="reregister"}`.
func Metric(addr, series string) (float64, error) {
	s, err := promtext.Scrape(context.Background(), "http://"+addr+"/metrics")
	if err != nil {
		return 0, err
	}
	v, err := s.Value(series)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", addr, err)
	}
	return v, nil
}

// DevKafka starts cmd/devkafka on a free port and returns its address.
func DevKafka(tb testing.TB) string {
	tb.Helper()
	_, addr := StartDevKafka(tb)
	return addr
}

// StartDevKafka starts cmd/devkafka on a free port and returns the
// process and its address.
func StartDevKafka(tb testing.TB) (*Proc, string) {
	tb.Helper()
	p := Start(tb, "devkafka", nil, "-addr", "127.0.0.1:0")
	re := regexp.MustCompile(`listening on (\S+)`)
	var addr string
	testkit.SucceedsSoon(tb, 10*time.Second, func() error {
		m := re.FindStringSubmatch(p.Logs())
		if m == nil {
			return fmt.Errorf("devkafka has not said where it listens: %q", p.Logs())
		}
		addr = m[1]
		return nil
	})
	return p, addr
}

// healthClient polls health URLs: a port another socket took may accept
// and never answer, and the poll must go on to see the child exit.
var healthClient = &http.Client{Timeout: time.Second}

func get200(url string) error {
	resp, err := healthClient.Get(url)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// GetOK polls url until it answers 200 and returns the body.
func GetOK(tb testing.TB, url string) []byte {
	tb.Helper()
	var body []byte
	testkit.SucceedsSoon(tb, 30*time.Second, func() error {
		resp, err := httpClient.Get(url)
		if err != nil {
			return err
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	})
	return body
}
