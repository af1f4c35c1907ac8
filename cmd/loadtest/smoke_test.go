package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/kafkatest"
	"github.com/danmaku/danmaku/internal/loadtest"
	"github.com/danmaku/danmaku/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Run(m)) }

// TestSmoke runs the small load scenario against the real binaries: 200
// viewers on two comets in three rooms, 100 messages per second for five
// seconds through logic, Kafka and job, viewers split over two worker
// processes. Every accepted message must reach every viewer of its room
// exactly once.
func TestSmoke(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"github.com/danmaku/danmaku/cmd/logic", "github.com/danmaku/danmaku/cmd/job",
		"github.com/danmaku/danmaku/cmd/comet", "github.com/danmaku/danmaku/cmd/loadtest")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rs := redistest.Standalone(t)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	topic := "lt-smoke-" + suffix
	kb := kafkatest.Start(t, kafkatest.Topic(topic, 4))
	secret := "smoke-secret-" + suffix
	common := []string{"-log.level", "warn", "-redis.addrs", rs.Addr}
	kafka := []string{"-kafka.brokers", kb.Addr(), "-kafka.topic", topic, "-kafka.partitions", "4", "-kafka.group", "lt-smoke-" + suffix}

	logicAddr := freeAddr(t)
	logic := start(t, bin, "logic", append(append(common, kafka...), "-config", "../../configs/logic.yaml",
		"-logic.listen", logicAddr, "-logic.rate_limit", "100000", "-logic.rate_burst", "100000")...)
	jobAddr := freeAddr(t)
	job := start(t, bin, "job", append(append(common, kafka...), "-config", "../../configs/job.yaml",
		"-job.metrics_addr", jobAddr, "-job.window", "100ms", "-job.push_secret", secret,
		"-job.session_timeout", "2s", "-job.heartbeat_interval", "200ms", "-job.rebalance_timeout", "2s",
		"-job.comet_refresh", "200ms")...)
	procs := []loadtest.Proc{{Name: "logic", PID: strconv.Itoa(logic)}, {Name: "job", PID: strconv.Itoa(job)}}
	var comets []string
	for k := 1; k <= 2; k++ {
		pub, internal := freeAddr(t), freeAddr(t)
		pid := start(t, bin, "comet", append(common, "-config", "../../configs/comet.yaml",
			"-comet.id", fmt.Sprintf("smoke-%s-%d", suffix, k), "-comet.listen", pub,
			"-comet.internal_listen", internal, "-comet.advertise", internal, "-comet.secret", secret,
			"-comet.max_conns_per_ip", "0")...)
		procs = append(procs, loadtest.Proc{Name: fmt.Sprintf("comet%d", k), PID: strconv.Itoa(pid)})
		comets = append(comets, pub)
		waitHTTP(t, "http://"+pub+"/healthz")
	}
	waitHTTP(t, "http://"+jobAddr+"/healthz")
	waitHTTP(t, "http://"+logicAddr+"/logic/online?roomId=smoke")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := loadtest.Run(ctx, loadtest.Config{
		Scenario: "smoke", Comets: comets, LogicURL: "http://" + logicAddr,
		Viewers: 200, Rooms: 3, RoomPrefix: "smoke-" + suffix + "-", Hot: 0.5,
		ConnRate: 1000, PerProcess: 100, Exe: filepath.Join(bin, "loadtest"),
		Rate: 100, Duration: 5 * time.Second, Senders: 8, Warmup: 20 * time.Second,
		Drain: time.Second, MaxDrain: 10 * time.Second,
		Procs: procs, JobMetrics: []string{"http://" + jobAddr + "/metrics"},
	})
	if err != nil {
		t.Fatalf("load test: %v", err)
	}
	rep.Print(testWriter{t})
	if rep.Processes != 2 {
		t.Errorf("viewer processes = %d, want 2", rep.Processes)
	}
	if rep.ViewerStats.Connected != 200 || rep.ViewerStats.WholeTimeExact != 200 {
		t.Errorf("viewers connected %d, whole time %d; want 200", rep.ViewerStats.Connected, rep.ViewerStats.WholeTimeExact)
	}
	if rep.Send.Accepted != 500 {
		t.Errorf("accepted %d of %d sent, want 500", rep.Send.Accepted, rep.Send.Sent)
	}
	if rep.Lost != 0 || rep.Duplicates != 0 || rep.Misrouted != 0 {
		t.Errorf("lost %d, duplicates %d, misrouted %d; want none", rep.Lost, rep.Duplicates, rep.Misrouted)
	}
	if rep.ExpectedExact == 0 || rep.ExactDelivered != rep.ExpectedExact {
		t.Errorf("delivered %d, expected %d", rep.ExactDelivered, rep.ExpectedExact)
	}
	if !rep.Pass {
		t.Errorf("report fails: %v", rep.Problems)
	}
	for _, s := range rep.Servers {
		if s.Error != "" || s.RSSEndMiB <= 0 {
			t.Errorf("server %s: no /proc figures (%s)", s.Name, s.Error)
		}
	}
}

// start runs a built binary until the test ends; it returns its pid.
func start(t *testing.T, bin, name string, args ...string) int {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, name), args...)
	log, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", name, b)
		}
		log.Close()
	})
	return cmd.Process.Pid
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}
