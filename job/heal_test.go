package job_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/job"
	"github.com/danmaku/danmaku/route"
)

// startJobLogged starts a job pushing with secret whose log is recorded.
func (e *env) startJobLogged(cfg job.Config, secret string) (*runningJob, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	return e.startJobWith(cfg, job.Deps{Pusher: push.NewClient(secret, cfg.PushTimeout), Log: zap.New(core)}), logs
}

func testMsg(i int) danmaku.Message {
	return danmaku.Message{ID: testkit.Uniq("h"), UID: 1, Name: "n", Content: fmt.Sprint(i), TS: time.Now().UnixMilli()}
}

// A 5 s Redis stall: the Begin scripts the job gave up on run when Redis
// resumes and take the room's lock with tokens nobody holds. The job
// releases them once Redis answers, so the room broadcasts again within a
// second, not after lock_ttl. Readiness follows Redis meanwhile.
func TestRedisStallBlocksARoomForOneRetryAtMost(t *testing.T) {
	srv, rdb := redisserver.Private(t)
	e := newEnvWith(t, 1, rdb)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	e.waitOnline(room, 1)
	cfg := jobConfig()
	cfg.RedisTimeout = 300 * time.Millisecond
	cfg.RetryMax = 300 * time.Millisecond // the backoff is not what this test measures
	cfg.LockTTL = 5 * time.Second
	cfg.ClaimTTL = 5 * time.Second
	j, _ := e.startJobLogged(cfg, pushSecret)

	var ids []string
	for i := range 5 {
		m := testMsg(i)
		ids = append(ids, m.ID)
		e.produce(room, m)
	}
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: ids})
	if err := j.Ready(context.Background()); err != nil {
		t.Fatalf("ready with redis up: %v", err)
	}

	resume := srv.PauseUntilResumed(t)
	stall := time.Now()
	for i := 5; time.Since(stall) < 5*time.Second; i++ {
		m := testMsg(i)
		ids = append(ids, m.ID)
		e.produce(room, m)
		time.Sleep(200 * time.Millisecond)
	}
	if counter(t, j.reg, "danmaku_job_retries_total", "reason", "redis") == 0 {
		t.Fatal("no delivery met the stall")
	}
	if err := j.Ready(context.Background()); err == nil {
		t.Fatal("job ready while redis is paused")
	}
	resume()
	back := time.Now()
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: ids})
	took := time.Since(back)
	t.Logf("room delivered %v after redis resumed; stale locks released: %v", took,
		counter(t, j.reg, "danmaku_job_stale_locks_released_total"))
	if took > time.Second {
		t.Fatalf("room blocked %v after redis answered, want at most 1s", took)
	}
	if err := j.Ready(context.Background()); err != nil {
		t.Fatalf("not ready after redis resumed: %v", err)
	}
}

// A comet whose push secret differs answers 401: the job logs it at error
// level, naming the secret, once per comet per minute, and counts the
// messages the comet did not get.
func TestPushSecretMismatchIsLoggedAndCounted(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("room")
	e.viewer(e.comets[0], room)
	e.waitOnline(room, 1)
	cfg := jobConfig()
	cfg.RetryMax = 100 * time.Millisecond
	cfg.GiveUpAfter = 2
	j, logs := e.startJobLogged(cfg, "another-push-secret")

	for i := range 3 {
		e.produce(room, testMsg(i))
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if n := counter(t, j.reg, "danmaku_job_undelivered_total", "reason", "unauthorized"); n < 3 {
			return fmt.Errorf("%v messages counted unauthorized, want 3", n)
		}
		return nil
	})
	id := e.comets[0].ID()
	var errs []observer.LoggedEntry
	for _, le := range logs.FilterLevelExact(zap.ErrorLevel).All() {
		if le.ContextMap()["comet"] == id {
			errs = append(errs, le)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("%d error entries for comet %s, want exactly 1 (once per minute): %v", len(errs), id, errs)
	}
	if msg := errs[0].Message; !strings.Contains(msg, "401") || !strings.Contains(msg, "push_secret") || !strings.Contains(msg, "secret") {
		t.Fatalf("401 log does not name the secret: %q", msg)
	}
}

// Messages that reach no comet are counted with their reason: a room
// nobody watches, a comet listed for the room without a lease.
func TestUndeliveredCountedByReason(t *testing.T) {
	e := newEnv(t, 1)
	watched, empty := testkit.Uniq("room"), testkit.Uniq("room")
	v := e.viewer(e.comets[0], watched)
	ghost := testkit.Uniq("gone")
	if err := e.store.Register(context.Background(), route.Conn{ID: ghost + "-c", Room: watched, Comet: ghost}); err != nil {
		t.Fatal(err)
	}
	e.waitOnline(watched, 2)
	j := e.startJob(jobConfig(), nil)
	m := testMsg(0)
	e.produce(watched, m)
	e.produce(empty, testMsg(1), testMsg(2))
	waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{watched: {m.ID}})
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		noLease := counter(t, j.reg, "danmaku_job_undelivered_total", "reason", "no_lease")
		noComets := counter(t, j.reg, "danmaku_job_undelivered_total", "reason", "no_comets")
		if noLease != 1 || noComets != 2 {
			return fmt.Errorf("undelivered no_lease %v (want 1), no_comets %v (want 2)", noLease, noComets)
		}
		return nil
	})
}
