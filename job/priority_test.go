package job_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/job"
)

// broadcastLog records when each message was delivered (the job's
// OnBroadcast hook).
type broadcastLog struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (l *broadcastLog) hook(_ string, _, unlocked time.Time, msgs []danmaku.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		if _, ok := l.at[m.ID]; !ok {
			l.at[m.ID] = unlocked
		}
	}
}

// when returns when id was delivered, waiting for the hook, which runs
// once the push is answered (the viewer may have the message before).
func (l *broadcastLog) when(t *testing.T, id string) time.Time {
	t.Helper()
	var at time.Time
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		var ok bool
		if at, ok = l.at[id]; !ok {
			return fmt.Errorf("no broadcast of %s", id)
		}
		return nil
	})
	return at
}

// TestHighPriorityLane: inside a room's window, with the room's queue at
// job.max_pending so that normal messages overflow, a high-priority
// message is neither dropped nor kept waiting for the window's end: it goes
// out with the normal messages queued before it (in two deliveries, the
// budget being their number), at the positions after theirs, well before
// the window ends. Under the drop policy it is not dropped for the
// cooldown either.
func TestHighPriorityLane(t *testing.T) {
	const window = 4 * time.Second
	for _, policy := range []string{job.PolicyCoalesce, job.PolicyDrop} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t, 1)
			room := testkit.Uniq("room")
			v := e.viewer(e.comets[0], room)
			e.waitOnline(room, 1)
			cfg := jobConfig()
			cfg.Policy = policy
			cfg.Window = window
			cfg.Budget, cfg.MaxPending = 10, 10
			log := &broadcastLog{at: map[string]time.Time{}}
			j := e.startJob(cfg, log.hook)

			msg := func(id string, p danmaku.Priority) danmaku.Message {
				return danmaku.Message{ID: id, UID: 1, Name: "n", Content: id, TS: time.Now().UnixMilli(), Priority: p}
			}
			e.produce(room, msg("first", danmaku.PriorityNormal))
			waitAll(t, 10*time.Second, []*viewer{v}, map[string][]string{room: {"first"}})
			opened := log.when(t, "first") // the room's window runs from here

			var batch []danmaku.Message
			for i := 0; i < 30; i++ {
				batch = append(batch, msg(fmt.Sprintf("n%d", i), danmaku.PriorityNormal))
			}
			batch = append(batch, msg("high", danmaku.PriorityHigh))
			e.produce(room, batch...)

			want := []string{"first"}
			dropped := 30.0 // the drop policy skips every normal message inside the window
			if policy == job.PolicyCoalesce {
				for i := 0; i < cfg.MaxPending; i++ {
					want = append(want, fmt.Sprintf("n%d", i))
				}
				dropped = 30 - float64(cfg.MaxPending)
			}
			want = append(want, "high")
			waitAll(t, window+5*time.Second, []*viewer{v}, map[string][]string{room: want})
			sent := log.when(t, "high")
			if d := sent.Sub(opened); d > window/2 {
				t.Fatalf("the high-priority message went out %v after the window opened; the window is %v: it waited", d, window)
			}
			t.Logf("high-priority message delivered %v into a %v window", sent.Sub(opened).Round(time.Millisecond), window)
			reason := "overflow"
			if policy == job.PolicyDrop {
				reason = "cooldown"
			}
			if c := counter(t, j.reg, "danmaku_job_dropped_total", "reason", reason); c != dropped {
				t.Fatalf("dropped (%s) = %v, want %v", reason, c, dropped)
			}
			// In the room's order: the high message has the last position,
			// after every normal message delivered with it.
			var last int64
			for _, a := range v.messages() {
				if a.Msg.Pos <= last {
					t.Fatalf("positions out of order at %s (%d after %d)", a.Msg.ID, a.Msg.Pos, last)
				}
				last = a.Msg.Pos
				if (a.Msg.ID == "high") != a.Msg.Priority.High() {
					t.Fatalf("message %s arrived with priority %v", a.Msg.ID, a.Msg.Priority)
				}
			}
			if got := v.messages(); got[len(got)-1].Msg.ID != "high" {
				t.Fatalf("last message %s, want the high-priority one", got[len(got)-1].Msg.ID)
			}
			if c := counter(t, j.reg, "danmaku_job_high_priority_total"); c != 1 {
				t.Fatalf("high_priority_total = %v, want 1", c)
			}
			if c := counter(t, j.reg, "danmaku_job_high_priority_early_total"); c != 1 {
				t.Fatalf("high_priority_early_total = %v, want 1", c)
			}
		})
	}
}
