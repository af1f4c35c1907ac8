package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/pgserver"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/vodstore"
)

// BenchmarkArchive measures the archive binary on each engine: comments
// archived per second and CPU microseconds per comment in the archive
// process (from /proc), catching up on a backlog of benchArchived comments
// of 30 characters in 20 rooms; the bytes the comments take on disk
// (table and index) per comment; then GET /logic/vod/segment through the
// logic binary at benchReadRate requests per second, open loop, for an
// ended stream (answers kept in logic's memory), a live one (logic's
// default logic.vod_live_cache: one database read a second) and the live
// one again through a logic that reads the database for every request
// (vod_live_cache 0), with 600 comments per segment. It runs once
// whatever b.N: go test -run '^$' -bench Archive -benchtime 1x ./e2e/
// (under flock /tmp/danmaku-heavy.lock).
func BenchmarkArchive(b *testing.B) { eachEngine(b, benchArchive) }

// eachEngine runs bench as a sub-benchmark per database engine, each on a
// database of its own.
func eachEngine(b *testing.B, bench func(b *testing.B, dsn string)) {
	for _, engine := range []string{"postgres", "sqlite"} {
		b.Run(engine, func(b *testing.B) {
			dsn := "sqlite:" + filepath.Join(b.TempDir(), "archive.db")
			if engine == "postgres" {
				dsn = pgserver.Start(b).DSN(b, "bench")
			}
			bench(b, dsn)
		})
	}
}

const (
	benchRooms     = 20
	benchReadRate  = 2000
	benchSegmentOf = 600
)

// benchArchived is the backlog the archive catches up on and
// benchReadFor how long the segment reads run: 200,000 and 5 s, or
// DANMAKU_BENCH_COMMENTS and DANMAKU_BENCH_READ_SECONDS (0: no reads) for a
// lighter run.
var benchArchived, benchReadFor = benchSetting("DANMAKU_BENCH_COMMENTS", 200000),
	time.Duration(benchSetting("DANMAKU_BENCH_READ_SECONDS", 5)) * time.Second

func benchSetting(env string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n >= 0 {
		return n
	}
	return def
}

func benchArchive(b *testing.B, dsn string) {
	broker := kafkabroker.Start(b, kafkabroker.MinSessionTimeout(time.Second), kafkabroker.Topic("danmaku-room", 4))
	brokers := strings.Join(broker.Brokers(), ",")
	rooms := make([]string, benchRooms)
	for i := range rooms {
		rooms[i] = testkit.Uniq("bench")
	}
	produceBacklog(b, broker.Brokers(), rooms)

	arcAddr := testkit.FreeAddr(b)
	cmd := exec.Command(filepath.Join(stack.Binaries(b), "archive"), "-config", "configs/archive.yaml",
		"-kafka.brokers", brokers, "-archive.dsn", dsn, "-archive.metrics_addr", arcAddr, "-log.level", "warn",
		"-archive.session_timeout", "1s", "-archive.heartbeat_interval", "200ms")
	cmd.Dir = stack.Root(b)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	metrics := "http://" + arcAddr + "/metrics"
	var t0 time.Time
	var cpu0 time.Duration
	testkit.SucceedsSoon(b, 60*time.Second, func() error {
		if n := scrape(metrics, "danmaku_archive_stored_total"); n == 0 {
			return fmt.Errorf("not started")
		}
		t0, cpu0 = time.Now(), procCPU(b, cmd.Process.Pid)
		return nil
	})
	testkit.SucceedsSoon(b, 5*time.Minute, func() error {
		if n := scrape(metrics, "danmaku_archive_stored_total"); n < float64(benchArchived) {
			return fmt.Errorf("stored %v of %d", n, benchArchived)
		}
		return nil
	})
	wall, cpu := time.Since(t0), procCPU(b, cmd.Process.Pid)-cpu0
	stored := scrape(metrics, "danmaku_archive_stored_total") // the first batch is in too; counted from t0 on below
	ctx := context.Background()
	st, err := vodstore.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	size, err := st.Size(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(benchArchived)/wall.Seconds(), "archived/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(benchArchived), "cpu-µs/comment")
	b.ReportMetric(float64(size)/stored, "bytes/comment")
	b.Logf("%.0f comments in %v, %v CPU; %d bytes on disk", stored, wall.Round(time.Millisecond), cpu, size)

	if benchReadFor == 0 {
		return
	}
	// Segment reads through logic.
	live, ended := fillReadStreams(b, st)
	redis := redisserver.Standalone(b)
	// One logic with the default configuration, one that reads the
	// database for every request about a live stream.
	cached := startBenchLogic(b, redis.Addr, brokers, dsn)
	uncached := startBenchLogic(b, redis.Addr, brokers, dsn, "-logic.vod_live_cache", "0")
	for _, c := range []struct {
		name string
		base string
		st   vodstore.Stream
	}{{"ended", cached, ended}, {"live", cached, live}, {"live-db", uncached, live}} {
		url := fmt.Sprintf("%s/logic/vod/segment?roomId=%s&streamId=%s&seg=0", c.base, c.st.Room, c.st.ID)
		p50, p99, errs := readLoad(url)
		b.ReportMetric(float64(p50.Microseconds())/1000, c.name+"-p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, c.name+"-p99-ms")
		b.Logf("segment of a %s stream (%d comments) at %d req/s: p50 %v, p99 %v, %d errors", c.name, benchSegmentOf, benchReadRate, p50, p99, errs)
		if errs > 0 {
			b.Errorf("%d failed reads", errs)
		}
	}
}

// startBenchLogic runs the logic binary reading the archive at dsn and
// returns its URL once it answers.
func startBenchLogic(b *testing.B, redis, brokers, dsn string, args ...string) string {
	addr := testkit.FreeAddr(b)
	lg := exec.Command(filepath.Join(stack.Binaries(b), "logic"), append([]string{"-config", "configs/logic.yaml",
		"-redis.addrs", redis, "-kafka.brokers", brokers, "-logic.listen", addr, "-log.level", "warn",
		"-logic.archive_dsn", dsn, "-logic.vod_rate_limit", "0"}, args...)...)
	lg.Dir = stack.Root(b)
	if err := lg.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lg.Process.Kill(); lg.Wait() })
	base := "http://" + addr
	testkit.SucceedsSoon(b, 20*time.Second, func() error {
		if s := status(base + "/healthz"); s != http.StatusOK {
			return fmt.Errorf("logic %d", s)
		}
		return nil
	})
	return base
}

// produceBacklog writes a stream start for each room, then benchArchived
// comments of 30 characters spread over the rooms.
func produceBacklog(b *testing.B, brokers, rooms []string) {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "danmaku-room", Balancer: &kafka.Hash{},
		BatchTimeout: 2 * time.Millisecond, BatchSize: 1000, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := time.Now().UnixMilli()
	var recs []kafka.Message
	for _, r := range rooms {
		v, err := danmaku.MarshalEvent(danmaku.Event{Op: danmaku.OpStreamStart, Room: r, ID: testkit.Uniq("ev"), Stream: "s", At: now - 60000})
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, kafka.Message{Key: []byte(r), Value: v})
	}
	if err := w.WriteMessages(ctx, recs...); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < benchArchived; i += 1000 {
		recs = recs[:0]
		for j := i; j < i+1000; j++ {
			r := rooms[j%len(rooms)]
			v, err := danmaku.MarshalEnvelope(r, danmaku.Message{ID: fmt.Sprintf("06h%013d", j), UID: int64(1000 + j%5000),
				Name: "viewer" + strconv.Itoa(j%5000), Content: fmt.Sprintf("comment number %014d!", j), TS: now - 60000 + int64(j/10)})
			if err != nil {
				b.Fatal(err)
			}
			recs = append(recs, kafka.Message{Key: []byte(r), Value: v})
		}
		if err := w.WriteMessages(ctx, recs...); err != nil {
			b.Fatal(err)
		}
	}
}

// fillReadStreams writes two streams of benchSegmentOf comments in their
// first segment: one live, one ended.
func fillReadStreams(b *testing.B, st vodstore.Store) (live, ended vodstore.Stream) {
	ctx := context.Background()
	for i, name := range []string{"live", "ended"} {
		s, err := st.StartStream(ctx, vodstore.Stream{Room: testkit.Uniq("read"), ID: name, Start: time.Now().UnixMilli(), Part: 99, EndOff: -1})
		if err != nil {
			b.Fatal(err)
		}
		batch := vodstore.Batch{}
		for j := range benchSegmentOf {
			batch.Rows = append(batch.Rows, vodstore.Row{SID: s.SID, Comment: vodstore.Comment{ID: fmt.Sprintf("r%d-%d", i, j),
				UID: int64(j), Name: "viewer", Content: fmt.Sprintf("comment number %014d!", j), Offset: int64(j) * 500}})
		}
		if name == "ended" {
			batch.Ends = []vodstore.End{{SID: s.SID, End: s.Start + vodstore.SegmentMS, EndOff: 1}}
		}
		if _, err := st.Write(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		if name == "live" {
			live = s
		} else {
			ended = s
		}
	}
	return live, ended
}

// readLoad sends GETs to url at benchReadRate per second for benchReadFor,
// each on its own schedule (open loop: a slow answer does not delay the
// next request), and returns the latencies' p50 and p99.
func readLoad(url string) (p50, p99 time.Duration, errs int) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	n := int(float64(benchReadRate) * benchReadFor.Seconds())
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * time.Second / benchReadRate)
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			resp, err := client.Get(url)
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				bufio.NewReader(resp.Body).WriteTo(discard{})
				resp.Body.Close()
			}
			d := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				errs++
				return
			}
			lats = append(lats, d)
		}()
	}
	wg.Wait()
	if len(lats) == 0 {
		return 0, 0, errs
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	return lats[len(lats)/2], lats[len(lats)*99/100], errs
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// scrape returns the value of an unlabelled series on a /metrics page.
func scrape(url, name string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// procCPU returns the user and system CPU time of process pid.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100 // USER_HZ
}

// BenchmarkArchiveBesideJob runs the archive binary beside the job binary
// (both consuming the room topic of the embedded broker; job with a real
// redis-server and no comets) while comments of 30 characters in 64 rooms
// are written to the topic at benchIngestRate for benchIngestFor, and
// reports what the archive wrote per second, its CPU per comment over the
// run (from /proc: until it caught up), the most records it was behind
// (danmaku_archive_lag_messages, sampled every 100 ms) and how long after
// the last record it had written them all and its lag gauge read 0. It
// runs once whatever b.N: go test -run '^$' -bench ArchiveBesideJob
// -benchtime 1x ./e2e/ (under flock /tmp/danmaku-heavy.lock).
func BenchmarkArchiveBesideJob(b *testing.B) { eachEngine(b, benchBesideJob) }

// benchIngestRate is the highest ingest BENCHMARKS.md reports for S4 on
// this machine (8,019 accepted/s, open loop); DANMAKU_BENCH_INGEST_RATE and
// DANMAKU_BENCH_INGEST_SECONDS change it and the run's length (20 s).
var benchIngestRate, benchIngestFor = benchSetting("DANMAKU_BENCH_INGEST_RATE", 8000),
	time.Duration(benchSetting("DANMAKU_BENCH_INGEST_SECONDS", 20)) * time.Second

func benchBesideJob(b *testing.B, dsn string) {
	broker := kafkabroker.Start(b, kafkabroker.MinSessionTimeout(time.Second), kafkabroker.Topic("danmaku-room", 16))
	brokers := strings.Join(broker.Brokers(), ",")
	redis := redisserver.Standalone(b)
	jobAddr, arcAddr := testkit.FreeAddr(b), testkit.FreeAddr(b)
	job := exec.Command(filepath.Join(stack.Binaries(b), "job"), "-config", "configs/job.yaml", "-log.level", "warn",
		"-redis.addrs", redis.Addr, "-kafka.brokers", brokers, "-job.metrics_addr", jobAddr, "-job.push_secret", "bench-push-secret-0123456789")
	arc := exec.Command(filepath.Join(stack.Binaries(b), "archive"), "-config", "configs/archive.yaml", "-log.level", "warn",
		"-kafka.brokers", brokers, "-archive.dsn", dsn, "-archive.metrics_addr", arcAddr)
	for _, cmd := range []*exec.Cmd{job, arc} {
		cmd.Dir = stack.Root(b)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	for _, ready := range []string{"http://" + jobAddr + "/readyz", "http://" + arcAddr + "/readyz"} {
		testkit.SucceedsSoon(b, 30*time.Second, func() error {
			if s := status(ready); s != http.StatusOK {
				return fmt.Errorf("%s: %d", ready, s)
			}
			return nil
		})
	}
	rooms := make([]string, 64)
	for i := range rooms {
		rooms[i] = testkit.Uniq("ingest")
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker.Brokers()...), Topic: "danmaku-room", Balancer: &kafka.Hash{},
		BatchTimeout: 2 * time.Millisecond, BatchSize: 1000, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx := context.Background()
	var starts []kafka.Message
	for _, r := range rooms {
		v, _ := danmaku.MarshalEvent(danmaku.Event{Op: danmaku.OpStreamStart, Room: r, ID: testkit.Uniq("ev"), Stream: "s", At: time.Now().UnixMilli()})
		starts = append(starts, kafka.Message{Key: []byte(r), Value: v})
	}
	if err := w.WriteMessages(ctx, starts...); err != nil {
		b.Fatal(err)
	}
	metrics := "http://" + arcAddr + "/metrics"
	testkit.SucceedsSoon(b, 30*time.Second, func() error {
		if n := scrape(metrics, `danmaku_archive_streams_total{op="start"}`); n < float64(len(rooms)) {
			return fmt.Errorf("%v streams started", n)
		}
		return nil
	})

	var maxLag float64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(100 * time.Millisecond):
				maxLag = max(maxLag, scrape(metrics, "danmaku_archive_lag_messages"))
			}
		}
	}()
	t0, cpu0 := time.Now(), procCPU(b, arc.Process.Pid)
	sent := produceAt(b, w, rooms, benchIngestRate, benchIngestFor)
	last := time.Now()
	testkit.SucceedsSoon(b, 5*time.Minute, func() error {
		if n := scrape(metrics, "danmaku_archive_stored_total"); n < float64(sent) {
			return fmt.Errorf("stored %v of %d", n, sent)
		}
		return nil
	})
	caughtUp, cpu := time.Since(last), procCPU(b, arc.Process.Pid)-cpu0
	testkit.SucceedsSoon(b, time.Minute, func() error {
		if lag := scrape(metrics, "danmaku_archive_lag_messages"); lag != 0 {
			return fmt.Errorf("lag %v", lag)
		}
		return nil
	})
	lagZero := time.Since(last)
	close(stopSampling)
	<-sampled
	rate := float64(sent) / last.Sub(t0).Seconds()
	b.ReportMetric(rate, "ingest/s")
	b.ReportMetric(float64(sent)/(last.Sub(t0)+caughtUp).Seconds(), "archived/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(sent), "cpu-µs/comment")
	b.ReportMetric(maxLag, "max-lag")
	b.ReportMetric(caughtUp.Seconds(), "caught-up-s")
	b.ReportMetric(lagZero.Seconds(), "lag-zero-s")
	b.Logf("%d comments at %.0f/s; archive CPU %v (%.1f µs/comment); max lag %.0f; all written %v and lag 0 %v after the last",
		sent, rate, cpu, float64(cpu.Microseconds())/float64(sent), maxLag, caughtUp.Round(time.Millisecond), lagZero.Round(time.Millisecond))
}

// produceAt writes comments of 30 characters spread over rooms at rate
// per second for d, in chunks every 10 ms on an absolute schedule, and
// returns how many it wrote.
func produceAt(b *testing.B, w *kafka.Writer, rooms []string, rate int, d time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	const tick = 10 * time.Millisecond
	per := max(rate*int(tick)/int(time.Second), 1)
	start := time.Now()
	n := 0
	for i := 0; time.Since(start) < d; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * tick)))
		recs := make([]kafka.Message, per)
		for j := range recs {
			k := n + j
			r := rooms[k%len(rooms)]
			v, err := danmaku.MarshalEnvelope(r, danmaku.Message{ID: fmt.Sprintf("06i%013d", k), UID: int64(1000 + k%5000),
				Name: "viewer" + strconv.Itoa(k%5000), Content: fmt.Sprintf("comment number %014d!", k), TS: time.Now().UnixMilli()})
			if err != nil {
				b.Fatal(err)
			}
			recs[j] = kafka.Message{Key: []byte(r), Value: v}
		}
		if err := w.WriteMessages(ctx, recs...); err != nil {
			b.Fatal(err)
		}
		n += per
	}
	return n
}
