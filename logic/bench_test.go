package logic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

// BenchmarkSend measures accepted single-message POST /logic/send requests
// through real HTTP (keep-alive), the Redis rate limiter and the embedded
// Kafka broker, from 32 concurrent clients:
//
//	go test -run '^$' -bench Send -benchtime 40000x ./logic/
//
// Knobs (environment): BENCH_CLIENTS (default 32), BENCH_ROOMS (rooms the
// clients spread over, default 1: one hot room), BENCH_BATCH_TIMEOUT
// (producer linger), BENCH_ADMIT_WAIT (logic.admit_batch_wait),
// BENCH_USERS (users the wrk driver spreads over, default 1),
// BENCH_DRIVER=wrk to drive the load with wrk(1) for
// BENCH_SECONDS (default 10) instead of the in-process Go client, which
// competes with the server for the same two cores.
func BenchmarkSend(b *testing.B) {
	clients := 32
	if n, err := strconv.Atoi(os.Getenv("BENCH_CLIENTS")); err == nil && n > 0 {
		clients = n
	}
	e := newEnv(b, func(c *Config, _ *testEnv) {
		c.RateLimit, c.RateBurst = 1e9, 1e9
		if d, err := time.ParseDuration(os.Getenv("BENCH_BATCH_TIMEOUT")); err == nil {
			c.BatchTimeout = d
		}
		if d, err := time.ParseDuration(os.Getenv("BENCH_ADMIT_WAIT")); err == nil {
			c.AdmitBatchWait = d
		}
	})
	rooms, _ := strconv.Atoi(os.Getenv("BENCH_ROOMS"))
	rooms = max(rooms, 1)
	if os.Getenv("BENCH_DRIVER") == "wrk" {
		cmds, cpu := redisserver.Commands(b, e.rdb), processCPU()
		n := benchWrk(b, e, clients)
		// The process holds logic and the embedded broker; wrk runs apart.
		b.ReportMetric(float64((processCPU()-cpu).Microseconds())/n, "cpu_us/req")
		b.ReportMetric(float64(redisserver.Commands(b, e.rdb)-cmds)/n, "redis_cmds/msg")
		reportProduce(b, e)
		return
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	bodies := make([][]byte, clients)
	for i := range bodies {
		bodies[i] = []byte(fmt.Sprintf(`{"roomId":"bench_room_%d","userId":%d,"userName":"bench","messages":[{"content":"弹幕 benchmark message"}]}`, i%rooms, newUser()))
	}
	var (
		left    atomic.Int64
		failed  atomic.Int64
		wg      sync.WaitGroup
		latMu   sync.Mutex
		latency []time.Duration
	)
	left.Store(int64(b.N))
	cmdsBefore := redisserver.Commands(b, e.rdb)
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(body []byte) {
			defer wg.Done()
			lat := make([]time.Duration, 0, b.N/clients+1)
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				resp, err := hc.Post(e.url+"/logic/send", "application/json", bytes.NewReader(body))
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					failed.Add(1)
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			latMu.Lock()
			latency = append(latency, lat...)
			latMu.Unlock()
		}(bodies[c])
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed", n, b.N)
	}
	sort.Slice(latency, func(i, j int) bool { return latency[i] < latency[j] })
	pct := func(p float64) float64 {
		return float64(latency[int(float64(len(latency)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(latency))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(float64(redisserver.Commands(b, e.rdb)-cmdsBefore)/float64(len(latency)), "redis_cmds/msg")
	reportProduce(b, e)
}

// processCPU is the CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWrk drives the server with wrk, reports its figures and returns the
// number of requests it sent.
func benchWrk(b *testing.B, e *testEnv, clients int) float64 {
	secs := 10
	if n, err := strconv.Atoi(os.Getenv("BENCH_SECONDS")); err == nil && n > 0 {
		secs = n
	}
	script := filepath.Join(b.TempDir(), "post.lua")
	// Each request of a wrk thread is the next of BENCH_USERS users (default
	// 1) in the next of BENCH_ROOMS rooms.
	users, _ := strconv.Atoi(os.Getenv("BENCH_USERS"))
	rooms, _ := strconv.Atoi(os.Getenv("BENCH_ROOMS"))
	lua := fmt.Sprintf(`wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local users, rooms, base, i = %d, %d, %d, math.random(1000000)
request = function()
  i = i + 1
  local body = '{"roomId":"bench_room_' .. (i %% rooms) .. '","userId":' .. (base + i %% users) ..
    ',"userName":"bench","messages":[{"content":"弹幕 benchmark message"}]}'
  return wrk.format(nil, nil, nil, body)
end
`, max(users, 1), max(rooms, 1), 1+newUser()%1e9)
	if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	out, err := exec.Command("wrk", "-t2", "-c"+strconv.Itoa(clients), "-d"+strconv.Itoa(secs)+"s",
		"--latency", "-s", script, e.url+"/logic/send").CombinedOutput()
	b.StopTimer()
	if err != nil {
		b.Fatalf("wrk (apt-get install wrk): %v\n%s", err, out)
	}
	b.Logf("wrk:\n%s", out)
	text := string(out)
	if strings.Contains(text, "Non-2xx") {
		b.Fatalf("wrk saw failed requests:\n%s", text)
	}
	var n float64
	if m := regexp.MustCompile(`([0-9]+) requests in`).FindStringSubmatch(text); m != nil {
		n, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`).FindStringSubmatch(text); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		b.ReportMetric(v, "req/s")
	}
	for _, p := range []string{"50", "99"} {
		m := regexp.MustCompile(`\s` + p + `%\s+([0-9.]+)(us|ms|s)`).FindStringSubmatch(text)
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		switch m[2] {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		b.ReportMetric(v, "p"+p+"_ms")
	}
	return max(n, 1)
}

// reportProduce reports the mean time a request waited for Kafka, to set
// against the end-to-end latency.
func reportProduce(b *testing.B, e *testEnv) {
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "danmaku_logic_kafka_produce_seconds" {
			for _, m := range mf.GetMetric() {
				if l := m.GetLabel(); len(l) == 1 && l[0].GetValue() == "ok" {
					h := m.GetHistogram()
					b.ReportMetric(h.GetSampleSum()/float64(h.GetSampleCount())*1000, "produce_avg_ms")
				}
			}
		}
	}
}

// BenchmarkSendParts measures the two remote calls of a send on their own,
// each from 32 goroutines, to set against BenchmarkSend in the same run:
// "allow" is the send check (sendpath.Path.Check: its one Redis call is
// the rate-limit script, the room's settings being cached), "produce" one single-message
// write through the producer to the embedded broker (the 32 writers share
// produce requests).
func BenchmarkSendParts(b *testing.B) {
	const workers = 32
	run := func(b *testing.B, op func(worker int) error) {
		var (
			left atomic.Int64
			wg   sync.WaitGroup
		)
		left.Store(int64(b.N))
		b.ResetTimer()
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					if err := op(w); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	}
	b.Run("allow", func(b *testing.B) {
		e := newEnv(b, func(c *Config, _ *testEnv) {
			c.RateLimit, c.RateBurst = 1e9, 1e9
			c.IPRateLimit, c.IPRateBurst = 1e9, 1e9
		})
		reqs := make([]SendRequest, workers)
		for i := range reqs {
			reqs[i] = sendReq("bench_room", newUser(), "x")
		}
		run(b, func(w int) error {
			_, _, err := e.srv.send.Check(context.Background(), nil, "127.0.0.1", &reqs[w])
			return err
		})
	})
	b.Run("produce", func(b *testing.B) {
		e := newEnv(b)
		req := sendReq("bench_room", newUser(), "弹幕 benchmark message")
		run(b, func(int) error {
			return e.srv.send.Produce(context.Background(), &req, sendpath.Checked{IDs: []string{""}})
		})
	})
}
