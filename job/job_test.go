package job_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"context"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/tools/promtext"
	"github.com/danmaku/danmaku/job"
)

// waitOnline waits until Redis lists n viewers of room (comets register
// connections asynchronously).
func (e *env) waitOnline(room string, n int64) {
	e.t.Helper()
	testkit.SucceedsSoon(e.t, 5*time.Second, func() error {
		got, err := e.store.Online(context.Background(), room)
		if err == nil && got != n {
			err = fmt.Errorf("room %s has %d viewers, want %d", room, got, n)
		}
		return err
	})
}

func TestEndToEnd(t *testing.T) {
	e := newEnv(t, 2)
	rooms := []string{testkit.Uniq("room"), testkit.Uniq("room"), testkit.Uniq("room")}
	var viewers []*viewer
	for i := 0; i < 20; i++ {
		viewers = append(viewers, e.viewer(e.comets[i%2], rooms[i%3]))
	}
	e.waitOnline(rooms[0], 7)
	e.waitOnline(rooms[1], 7)
	e.waitOnline(rooms[2], 6)
	e.startJob(jobConfig(), nil)

	want := map[string][]string{}
	for i := 0; i < 50; i++ {
		room := rooms[i%3]
		contents := make([]string, 10)
		for k := range contents {
			contents[k] = fmt.Sprintf("m%d-%d", i, k)
		}
		want[room] = append(want[room], e.send(room, int64(1+i%5), contents...)...)
	}
	if n := len(want[rooms[0]]) + len(want[rooms[1]]) + len(want[rooms[2]]); n != 500 {
		t.Fatalf("logic accepted %d messages, want 500", n)
	}
	waitAll(t, 30*time.Second, viewers, want)
	for _, v := range viewers {
		if rooms := v.rooms(); len(rooms) != 1 || !rooms[v.room] {
			t.Fatalf("viewer of %s received frames of %v", v.room, rooms)
		}
	}
}

func TestSameMsgIDShownOnce(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	e.waitOnline(room, 1)
	j := e.startJob(jobConfig(), nil)

	// Through logic: a client retry with the same msgId gets the same id.
	a := e.sendWithIDs(room, 7, []string{"retry-1"}, "hello")
	b := e.sendWithIDs(room, 7, []string{"retry-1"}, "hello")
	if a[0] != b[0] {
		t.Fatalf("retry acknowledged with %q, first time %q", b[0], a[0])
	}
	// Straight into Kafka: the same record twice, in separate batches, so
	// the second reaches the job after the first was delivered.
	dup := danmaku.Message{ID: testkit.Uniq("dup"), UID: 1, Name: "n", Content: "once", TS: time.Now().UnixMilli()}
	e.produce(room, dup)
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: {a[0], dup.ID}})
	e.produce(room, dup)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if c := counter(t, j.reg, "danmaku_job_duplicates_total"); c < 2 {
			return fmt.Errorf("duplicates = %v, want at least 2", c)
		}
		return nil
	})
	marker := danmaku.Message{ID: testkit.Uniq("marker"), UID: 1, Name: "n", Content: "after", TS: time.Now().UnixMilli()}
	e.produce(room, marker)
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: {a[0], dup.ID, marker.ID}})
}

func TestCooldownPolicies(t *testing.T) {
	for _, policy := range []string{job.PolicyCoalesce, job.PolicyDrop} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t, 1)
			room := testkit.Uniq("room")
			v := e.viewer(e.comets[0], room)
			e.waitOnline(room, 1)
			cfg := jobConfig()
			cfg.Window = time.Second
			cfg.Policy = policy
			j := e.startJob(cfg, nil)

			first := e.send(room, 1, "first")
			waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: first})
			sent := time.Now()
			rest := e.send(room, 1, "two", "three", "four", "five")
			if time.Since(sent) > 500*time.Millisecond {
				t.Fatalf("sending took %v: no longer inside the window", time.Since(sent))
			}
			if policy == job.PolicyCoalesce {
				waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: append(first, rest...)})
				if got := v.frameSizes(); len(got) != 2 || got[0] != 1 || got[1] != 4 {
					t.Fatalf("frames %v, want [1 4]: a first message, then one batch of 4", got)
				}
				if c := counter(t, j.reg, "danmaku_job_dropped_total"); c != 0 {
					t.Fatalf("%v messages dropped under coalesce", c)
				}
				if c := counter(t, j.reg, "danmaku_job_coalesced_total"); c != 4 {
					t.Fatalf("coalesced = %v, want 4 (the trailing batch)", c)
				}
				return
			}
			testkit.SucceedsSoon(t, 10*time.Second, func() error {
				if c := counter(t, j.reg, "danmaku_job_dropped_total", "reason", "cooldown"); c != 4 {
					return fmt.Errorf("dropped for cooldown = %v, want 4", c)
				}
				return nil
			})
			time.Sleep(1500 * time.Millisecond) // past the window: nothing more may come
			if got := v.frameSizes(); len(got) != 1 || got[0] != 1 {
				t.Fatalf("frames %v, want [1]: the first message, the rest skipped", got)
			}
		})
	}
}

// interval is one hold of a room's broadcast lock by one job.
type interval struct {
	job        int
	start, end time.Time
}

func TestTwoJobsNeverBroadcastARoomAtOnce(t *testing.T) {
	e := newEnv(t, 2)
	rooms := make([]string, 8)
	var viewers []*viewer
	for i := range rooms {
		rooms[i] = testkit.Uniq("room")
		viewers = append(viewers, e.viewer(e.comets[i%2], rooms[i]))
	}
	for _, r := range rooms {
		e.waitOnline(r, 1)
	}
	var mu sync.Mutex
	held := map[string][]interval{}
	hook := func(id int) func(string, time.Time, time.Time, []danmaku.Message) {
		return func(room string, start, end time.Time, _ []danmaku.Message) {
			mu.Lock()
			held[room] = append(held[room], interval{id, start, end})
			mu.Unlock()
		}
	}
	cfg := jobConfig()
	cfg.Window = 20 * time.Millisecond
	e.startJob(cfg, hook(1))

	want := map[string][]string{}
	for i := 0; i < 120; i++ {
		if i == 40 {
			e.startJob(cfg, hook(2)) // joins the group mid-stream: partitions move
		}
		room := rooms[i%len(rooms)]
		want[room] = append(want[room], e.send(room, int64(i%7+1), fmt.Sprintf("c%d", i))...)
		time.Sleep(15 * time.Millisecond)
	}
	waitAll(t, 30*time.Second, viewers, want)

	mu.Lock()
	defer mu.Unlock()
	jobs := map[int]bool{}
	for room, ivs := range held {
		sort.Slice(ivs, func(a, b int) bool { return ivs[a].start.Before(ivs[b].start) })
		for i := 1; i < len(ivs); i++ {
			jobs[ivs[i].job] = true
			if ivs[i].start.Before(ivs[i-1].end) {
				t.Fatalf("room %s: job %d broadcast at %v while job %d held the lock until %v",
					room, ivs[i].job, ivs[i].start, ivs[i-1].job, ivs[i-1].end)
			}
		}
	}
	if !jobs[1] || !jobs[2] {
		t.Fatalf("broadcasts by jobs %v: both jobs should have taken part", jobs)
	}
}

func TestCrashLosesNothing(t *testing.T) {
	e := newEnv(t, 2)
	rooms := []string{testkit.Uniq("room"), testkit.Uniq("room")}
	var viewers []*viewer
	for i := 0; i < 4; i++ {
		viewers = append(viewers, e.viewer(e.comets[i%2], rooms[i/2]))
	}
	e.waitOnline(rooms[0], 2)
	e.waitOnline(rooms[1], 2)
	cfg := jobConfig()
	a := e.startJob(cfg, nil)

	want := map[string][]string{}
	var wmu sync.Mutex
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; i < 200; i++ {
			room := rooms[i%2]
			contents := make([]string, 10)
			for k := range contents {
				contents[k] = fmt.Sprintf("c%d-%d", i, k)
			}
			ids := e.send(room, int64(i%9+1), contents...)
			wmu.Lock()
			want[room] = append(want[room], ids...)
			wmu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// Kill the job once some, not all, has been delivered.
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if n := viewers[0].total(); n < 200 {
			return fmt.Errorf("%d messages delivered, waiting for 200", n)
		}
		return nil
	})
	a.Crash()
	<-a.Done()
	if viewers[0].total() >= 1000 {
		t.Fatalf("everything was delivered before the crash; the test proves nothing")
	}
	e.startJob(cfg, nil)
	<-sent
	wmu.Lock()
	defer wmu.Unlock()
	if n := len(want[rooms[0]]) + len(want[rooms[1]]); n != 2000 {
		t.Fatalf("accepted %d, want 2000", n)
	}
	waitAll(t, 60*time.Second, viewers, want)
}

// TestHungCometDoesNotDelayOthers registers a comet whose push endpoint
// accepts connections and never answers: pushes to it time out, and the
// live comet's viewers keep receiving within the push timeout.
func TestHungCometDoesNotDelayOthers(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	e.waitOnline(room, 1)

	e.hungComet(room)
	cfg := jobConfig()
	cfg.PushTimeout = 300 * time.Millisecond
	cfg.PushAttempts = 1
	j := e.startJob(cfg, nil)

	var ids []string
	var worst time.Duration
	for i := 0; i < 10; i++ {
		start := time.Now()
		id := e.send(room, 1, fmt.Sprintf("m%d", i))
		ids = append(ids, id...)
		waitAll(t, 5*time.Second, []*viewer{v}, map[string][]string{room: ids})
		worst = max(worst, time.Since(start))
	}
	// Window 50ms + one push timeout + slack for a loaded machine.
	if limit := cfg.Window + cfg.PushTimeout + 700*time.Millisecond; worst > limit {
		t.Fatalf("slowest delivery took %v with a hung comet, limit %v", worst, limit)
	}
	// The live comet answers every push, so the failed pushes and the
	// dropped shares are the hung comet's.
	if c := counter(t, j.reg, "danmaku_job_push_errors_total", "reason", "unavailable"); c < 1 {
		t.Fatalf("no push to the hung comet failed (%v): it was never tried", c)
	}
	if c := counter(t, j.reg, "danmaku_job_dropped_total", "reason", "comet_failed"); c < 1 {
		t.Fatalf("the hung comet's share was not counted (%v)", c)
	}
}

func TestRedisOutagePausesWithoutLoss(t *testing.T) {
	srv, err := redisserver.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	e := newEnvWith(t, 1, rdb)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	e.waitOnline(room, 1)
	j := e.startJob(jobConfig(), nil)

	var ids []string
	msg := func(i int) danmaku.Message {
		m := danmaku.Message{ID: testkit.Uniq("r"), UID: 1, Name: "n", Content: fmt.Sprint(i), TS: time.Now().UnixMilli()}
		ids = append(ids, m.ID)
		return m
	}
	for i := 0; i < 20; i++ {
		e.produce(room, msg(i))
	}
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: ids})

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 60; i++ {
		e.produce(room, msg(i))
		time.Sleep(50 * time.Millisecond)
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if counter(t, j.reg, "danmaku_job_retries_total", "reason", "redis") == 0 {
			return fmt.Errorf("no delivery retried for redis yet")
		}
		return nil
	})
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitAll(t, 20*time.Second, []*viewer{v}, map[string][]string{room: ids})
}

// TestBudgetDefersToNextWindow: what exceeds a window's budget goes out in
// the following windows, in order, and nothing is dropped.
func TestBudgetDefersToNextWindow(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	e.waitOnline(room, 1)
	cfg := jobConfig()
	cfg.Window = 300 * time.Millisecond
	cfg.Budget = 3
	j := e.startJob(cfg, nil)

	ids := e.send(room, 1, "first")
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: ids})
	ids = append(ids, e.send(room, 1, "a", "b", "c", "d", "e", "f", "g")...)
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: ids})
	got := v.frameSizes()
	if len(got) != 4 || got[0] != 1 || got[1] != 3 || got[2] != 3 || got[3] != 1 {
		t.Fatalf("frames %v, want [1 3 3 1]", got)
	}
	if c := counter(t, j.reg, "danmaku_job_deferred_total"); c < 4 {
		t.Fatalf("deferred = %v, want at least 4", c)
	}
	if c := counter(t, j.reg, "danmaku_job_dropped_total"); c != 0 {
		t.Fatalf("dropped = %v", c)
	}
}

// TestLargeMessagesSplitBelowPushLimit: a room batch of large messages
// whose push body would pass the comet's limit (comet.max_push_bytes,
// 4 MiB) is split by bytes (job.max_batch_bytes), as a batch of many
// messages is split at the budget: no push is refused, nothing is counted
// dropped or undelivered, and the viewer gets every message once, in
// frames below the limit.
func TestLargeMessagesSplitBelowPushLimit(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	e.waitOnline(room, 1)

	// 300 messages of 30 KB: 9 MB, twice the comet's limit, in Kafka
	// before the job starts, so its first windows gather megabytes.
	content := strings.Repeat("x", 30000)
	msgs := make([]danmaku.Message, 300)
	want := make([]string, len(msgs))
	for i := range msgs {
		want[i] = testkit.Uniq("big")
		msgs[i] = danmaku.Message{ID: want[i], UID: 1, Name: "n", Content: content, TS: time.Now().UnixMilli()}
	}
	e.produce(room, msgs...)
	cfg := jobConfig()
	cfg.Window = 5 * time.Second
	// A push of megabytes may take a while under the race detector on a
	// busy machine; a timeout is not what this test is about (a timed-out
	// push is tried again, up to job.give_up_after times). A refused push
	// is: the comet answers 400, or, when it answers before reading the
	// whole body, the connection is reset; the comet counts both as
	// bad_request.
	cfg.PushTimeout, cfg.ClaimTTL = 10*time.Second, time.Minute
	j := e.startJob(cfg, nil)

	lost := func() float64 {
		return counter(t, j.reg, "danmaku_job_dropped_total") + counter(t, j.reg, "danmaku_job_undelivered_total")
	}
	refused := func() float64 {
		sc, err := promtext.Scrape(context.Background(), "http://"+e.comets[0].InternalAddr()+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		n, err := sc.Value(`danmaku_comet_push_batches_total{result="bad_request"}`)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// 9 MB through JSON and the race detector take from 20 s on a quiet
	// machine to minutes on a busy one: the wait fails when no message
	// arrived for longer than two push timeouts and the window, not at a
	// fixed time.
	waitProgress(t, 30*time.Second, 5*time.Minute, func() (int, error) {
		if n := refused() + lost(); n > 0 {
			t.Fatalf("%v pushes refused or messages dropped or undelivered", n)
		}
		have, _ := v.count(want)
		if have < len(want) {
			return have, fmt.Errorf("viewer has %d of %d messages", have, len(want))
		}
		return have, nil
	})
	waitAll(t, time.Second, []*viewer{v}, map[string][]string{room: want})
	if n := refused() + lost(); n > 0 {
		t.Fatalf("%v pushes refused, messages dropped or undelivered", n)
	}
	if sizes := v.frameSizes(); len(sizes) < 3 {
		t.Fatalf("9 MB of messages in %d frames %v, want them split below 4 MiB", len(sizes), sizes)
	}
	t.Logf("frames of %v messages", v.frameSizes())
}

// TestShutdownBoundedByContext: a delivery hangs on a comet that never
// answers; Shutdown returns when its context ends, not after the push
// timeout or the drain timeout, and the job then stops promptly.
func TestShutdownBoundedByContext(t *testing.T) {
	e := newEnv(t, 0)
	room := testkit.Uniq("room")
	_, accepted := e.hungComet(room)
	ctx := context.Background()
	cfg := jobConfig()
	cfg.PushTimeout, cfg.PushAttempts, cfg.ClaimTTL = 10*time.Second, 1, 11*time.Second
	cfg.DrainTimeout = 10 * time.Second
	cfg.Workers = 1
	j := e.startJob(cfg, nil)
	e.produce(room, danmaku.Message{ID: testkit.Uniq("m"), UID: 1, Name: "n", Content: "stuck", TS: time.Now().UnixMilli()})
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the job never pushed to the hung comet")
	}
	// A second room waits for the only worker: once the drain is given
	// up it must not be sent out (and sent back) again and again.
	e.produce(testkit.Uniq("room"), danmaku.Message{ID: testkit.Uniq("m"), UID: 1, Name: "n", Content: "waiting", TS: time.Now().UnixMilli()})
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if c := counter(t, j.reg, "danmaku_job_consumed_total"); c < 2 {
			return fmt.Errorf("consumed %v records, want 2", c)
		}
		return nil
	})

	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := j.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Shutdown took %v with a 300ms context", took)
	}
	select {
	case <-j.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not stop within 5s of giving up its drain")
	}
	if err := j.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
}

// A comet that starts after the job has read the live comets gets its first
// viewers' messages: the job rereads the leases when a room names a comet it
// does not know, instead of taking the room for one nobody watches.
func TestCometStartedAfterJob(t *testing.T) {
	e := newEnv(t, 0)
	cfg := jobConfig()
	cfg.CometRefresh = time.Hour // only the on-demand reread can find the new comet
	e.startJob(cfg, nil)         // Start reads the live comets once: none yet

	c := e.addComet()
	room := testkit.Uniq("room")
	v := e.viewer(c, room)
	e.waitOnline(room, 1)
	ids := e.send(room, 1, "first", "second")
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: ids})
}
