// Package redisserver starts real redis-server processes for tests: a
// standalone server and a 3-master Redis Cluster, each on free loopback
// ports, shared by all tests of one test binary and stopped by Run.
//
// A missing redis-server (or redis-cli for the cluster) fails the test: the
// suite never silently skips the Redis half of what it claims to test.
//
// DANMAKU_TEST_REDIS_SERVER (ServerEnv) chooses another server binary, for
// example valkey-server; every server started is checked to be that kind.
//
//	func TestMain(m *testing.M) { os.Exit(redisserver.Run(m)) }
//
//	func TestX(t *testing.T) {
//		rdb := redisserver.Client(t)        // standalone
//		rc := redisserver.ClusterClient(t)  // cluster
//	}
package redisserver

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	Addr string
	bin  string
	args []string
	dir  string

	mu  sync.Mutex // guards cmd, replaced by Restart
	cmd *exec.Cmd
}

// Cluster is a running Redis Cluster: the shared one of three masters and
// no replicas, or one of a test's own (NewCluster).
type Cluster struct {
	Addrs   []string
	servers []*Server
}

var (
	mu        sync.Mutex // guards single, cluster, startErr; taken before startedMu
	startedMu sync.Mutex
	started   []*Server
	single    *Server
	cluster   *Cluster
	startErr  = map[string]error{}
)

// Run runs the tests and stops every server they started.
func Run(m *testing.M) int {
	code := m.Run()
	StopAll()
	return code
}

// StopAll stops every server started by this package.
func StopAll() {
	mu.Lock()
	defer mu.Unlock()
	startedMu.Lock()
	defer startedMu.Unlock()
	for _, s := range started {
		s.Stop()
	}
	started, single, cluster = nil, nil, nil
}

// Standalone returns the shared standalone server, starting it on first use.
func Standalone(tb testing.TB) *Server {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if err := startErr["standalone"]; err != nil {
		tb.Fatalf("redis-server: %v", err)
	}
	if single == nil {
		s, err := StartServer()
		if err != nil {
			startErr["standalone"] = err
			tb.Fatalf("redis-server: %v", err)
		}
		single = s
	}
	return single
}

// SharedCluster returns the shared cluster, starting it on first use.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if err := startErr["cluster"]; err != nil {
		tb.Fatalf("redis cluster: %v", err)
	}
	if cluster == nil {
		c, err := StartCluster()
		if err != nil {
			startErr["cluster"] = err
			tb.Fatalf("redis cluster: %v", err)
		}
		cluster = c
	}
	return cluster
}

// Client returns a client of the shared standalone server, closed when the
// test ends.
func Client(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	s := Standalone(tb)
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{s.Addr}})
	tb.Cleanup(func() { c.Close() })
	return c
}

// ClusterClient returns a cluster client of the shared cluster, closed when
// the test ends.
func ClusterClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	c := SharedCluster(tb)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	tb.Cleanup(func() { rc.Close() })
	return rc
}

// Private starts a server of tb's own (New) and returns it with a client
// that gives up on a command when its context ends and never retries, so a
// paused server shows as timeouts.
func Private(tb testing.TB) (*Server, redis.UniversalClient) {
	tb.Helper()
	s := New(tb)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	tb.Cleanup(func() { c.Close() })
	return s, c
}

// PauseUntilResumed pauses s (Pause) and returns the function resuming it,
// which may be called more than once; the server is resumed when the test
// ends in any case.
func (s *Server) PauseUntilResumed(tb testing.TB) (resume func()) {
	tb.Helper()
	if err := s.Pause(); err != nil {
		tb.Fatalf("pause redis-server: %v", err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := s.Resume(); err != nil {
				tb.Errorf("resume redis-server: %v", err)
			}
		})
	}
	tb.Cleanup(resume)
	return resume
}

// Each runs fn as two subtests, "standalone" and "cluster", with a client of
// each kind.
func Each(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient)) {
	t.Helper()
	t.Run("standalone", func(t *testing.T) { fn(t, Client(t)) })
	t.Run("cluster", func(t *testing.T) { fn(t, ClusterClient(t)) })
}

// StartServer starts a standalone redis-server (or the server ServerEnv
// names) with extra config arguments (for example "--cluster-enabled",
// "yes") and waits until it answers PING.
func StartServer(extra ...string) (*Server, error) {
	bin, err := serverBinary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redisserver-")
		if err != nil {
			return nil, err
		}
		args := append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--daemonize", "no", "--loglevel", "warning", "--protected-mode", "no",
		}, extra...)
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bin: bin, args: args, dir: dir}
		if err := s.start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := s.waitReady(5 * time.Second); err != nil {
			lastErr = fmt.Errorf("%w; log: %s", err, tail(filepath.Join(dir, "redis.log")))
			s.Stop()
			continue // most likely the port was taken meanwhile
		}
		if err := checkFlavour(s.Addr, bin); err != nil {
			s.Stop()
			return nil, err
		}
		startedMu.Lock()
		started = append(started, s)
		startedMu.Unlock()
		return s, nil
	}
	return nil, lastErr
}

// start runs the process; its output goes to redis.log in its directory.
func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.args...)
	logf, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = ChildAttr()
	// The parent of a child with a death signal is the thread that
	// started it: keep this goroutine on it while it does.
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	return nil
}

func (s *Server) proc() *exec.Cmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd
}

// Running reports whether the server process runs (it was not killed).
func (s *Server) Running() bool {
	cmd := s.proc()
	return cmd != nil && cmd.ProcessState == nil
}

func (s *Server) waitReady(d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not ready: %w", s.Addr, err)
		}
		if s.proc().ProcessState != nil {
			return fmt.Errorf("redis-server exited")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	s.Kill()
	os.RemoveAll(s.dir)
}

// Kill ends the server with SIGKILL, as a crash or a lost machine would,
// and waits for it to exit. The server keeps nothing on disk, so what it
// held is gone; Restart brings up an empty one on the same address.
func (s *Server) Kill() {
	cmd := s.proc()
	if cmd == nil || cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// Restart starts an empty server on the same address after Kill (it
// kills a running one first) and waits until it answers PING: what
// clients see of a restart without persistence or a failover to a replica
// that lost every write.
func (s *Server) Restart() error {
	s.Kill()
	var err error
	// A start that loses the port to another socket in between is retried.
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.start(); err != nil {
			return err
		}
		if err = s.waitReady(5 * time.Second); err == nil {
			return nil
		}
		s.Kill()
	}
	return fmt.Errorf("restart: %w; log: %s", err, tail(filepath.Join(s.dir, "redis.log")))
}

// Pause stops the server process (SIGSTOP) until Resume: clients then see
// timeouts, as with a hung or partitioned Redis.
func (s *Server) Pause() error { return s.proc().Process.Signal(stopSignal) }

// Resume continues a paused server.
func (s *Server) Resume() error { return s.proc().Process.Signal(contSignal) }

// New starts a server that belongs to tb alone, for tests that kill,
// restart or pause it; it is stopped when tb ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s, err := StartServer()
	if err != nil {
		tb.Fatalf("redis-server: %v", err)
	}
	tb.Cleanup(s.Stop) // SIGKILL ends a paused server too
	return s
}

// StartCluster starts three cluster-enabled servers and joins them into a
// cluster with redis-cli --cluster create, waiting for cluster_state:ok.
func StartCluster() (*Cluster, error) {
	return startCluster(ClusterSpec{Masters: 3, NodeTimeout: 2 * time.Second})
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, s := range c.servers {
		s.Stop()
	}
}

// freePort returns a loopback port that is free and whose cluster bus port
// (port+10000) is free too.
func freePort() (int, error) {
	for i := 0; i < 100; i++ {
		p := 20000 + rand.IntN(30000)
		if canListen(p) && canListen(p+10000) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port found")
}

func canListen(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 10 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// CommandCalls reads INFO commandstats of the server rdb talks to, or of
// every master of a cluster, summed: the calls of each command so far
// ("set", "evalsha", "client|setinfo"), commands run by scripts included.
func CommandCalls(tb testing.TB, rdb redis.UniversalClient) map[string]int64 {
	tb.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	m := map[string]int64{}
	visit := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			m[name] += n
		}
		return nil
	}
	if err := ForEachMaster(ctx, rdb, visit); err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	return m
}

// ForEachMaster calls fn with a client of each master of a cluster client
// (concurrently, as ClusterClient.ForEachMaster does), or with rdb itself
// when it talks to one server.
func ForEachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("unsupported client %T", rdb)
}

// Commands is the sum of CommandCalls: what Redis ran so far, commands run
// by scripts included, INFO itself and a cluster client's topology queries
// (CLUSTER ...) left out.
func Commands(tb testing.TB, rdb redis.UniversalClient) int64 {
	tb.Helper()
	var sum int64
	for name, n := range CommandCalls(tb, rdb) {
		if name != "info" && !strings.HasPrefix(name, "cluster") {
			sum += n
		}
	}
	return sum
}
