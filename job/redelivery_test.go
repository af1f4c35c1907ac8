package job_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/job"
)

// gatedPusher pushes through a real push client unless its gate is shut:
// then a push is counted and, with hold set, waits for its context (a job
// that stops in the middle of a push), else fails as an unavailable comet.
type gatedPusher struct {
	real   job.Pusher
	shut   atomic.Bool
	hold   bool
	failed atomic.Int64
	once   sync.Once
	hit    chan struct{} // closed at the first push that met the shut gate
}

func newGatedPusher(hold bool) *gatedPusher {
	p := &gatedPusher{real: push.NewClient(pushSecret, time.Second), hold: hold, hit: make(chan struct{})}
	p.shut.Store(true)
	return p
}

func (p *gatedPusher) Push(ctx context.Context, addr string, body []byte) (int, error) {
	if !p.shut.Load() {
		return p.real.Push(ctx, addr, body)
	}
	p.failed.Add(1)
	p.once.Do(func() { close(p.hit) })
	if p.hold {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return 0, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "comet unavailable (test)")
}

// checkOnePositionEach checks that every viewer got want exactly once, at
// positions 1..len(want) of one epoch in order, and that the room's history
// holds each message once, at the position the viewers got.
func (e *env) checkOnePositionEach(viewers []*viewer, room string, want []string) {
	t := e.t
	t.Helper()
	waitAll(t, 30*time.Second, viewers, map[string][]string{room: want})
	heads, err := e.store.Heads(context.Background(), []string{room})
	if err != nil {
		t.Fatal(err)
	}
	if h := heads[room]; h.Last != int64(len(want)) {
		t.Fatalf("the timeline has %d positions for %d messages: a message was given two", h.Last, len(want))
	}
	for _, v := range viewers {
		e.checkTimeline(v, 0, want, heads[room].Epoch, 1)
	}
}

// newRoomOnTwoComets starts an env with two comets and one viewer of a new
// room on each.
func newRoomOnTwoComets(t *testing.T) (*env, string, []*viewer) {
	e := newEnv(t, 2)
	room := testkit.Uniq("room")
	viewers := []*viewer{e.viewer(e.comets[0], room), e.viewer(e.comets[1], room)}
	e.waitOnline(room, 2)
	return e, room, viewers
}

// A push that fails at every comet after BeginBroadcast is retried at the
// positions Begin gave: the retry neither assigns new ones nor shows a
// message twice, and the history holds each message once.
func TestFailedPushRetriedAtSamePositions(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	p := newGatedPusher(false)
	cfg := jobConfig()
	cfg.PushAttempts = 1
	j := e.startJobWith(cfg, job.Deps{Pusher: p})

	want := e.send(room, 1, "a", "b", "c")
	<-p.hit
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if c := counter(t, j.reg, "danmaku_job_retries_total", "reason", "push"); c < 2 {
			return fmt.Errorf("push retries = %v, want 2", c)
		}
		return nil
	})
	p.shut.Store(false)
	want = append(want, e.send(room, 2, "d", "e")...)
	e.checkOnePositionEach(viewers, room, want)
}

// A job stopped after BeginBroadcast, in the middle of its push, without
// committing: the next job redelivers the batch, finds each message's
// position in its claim, and pushes it at that position. Every viewer gets
// every message once, at positions 1..N.
func TestRedeliveryAfterBeginKeepsPositions(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	p := newGatedPusher(true)
	a := e.startJobWith(jobConfig(), job.Deps{Pusher: p})

	want := e.send(room, 1, "a", "b", "c", "d")
	<-p.hit
	a.Crash()
	<-a.Done()
	if n := viewers[0].total(); n != 0 {
		t.Fatalf("a viewer got %d messages before the redelivery", n)
	}
	b := e.startJob(jobConfig(), nil)
	want = append(want, e.send(room, 2, "e", "f")...)
	// The new job has taken up what the stopped one had begun: it found
	// the message(s) with their positions.
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if c := counter(t, b.reg, "danmaku_job_duplicates_total"); c < 1 {
			return fmt.Errorf("duplicates = %v: the redelivered batch was not found positioned", c)
		}
		return nil
	})
	e.checkOnePositionEach(viewers, room, want)
}
