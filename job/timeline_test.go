package job_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/job"
)

// received returns what v got so far and the epoch each came with.
func (v *viewer) received() ([]danmaku.Message, []string) {
	var msgs []danmaku.Message
	var epochs []string
	for _, a := range v.messages() {
		msgs = append(msgs, a.Msg)
		epochs = append(epochs, a.Epoch)
	}
	return msgs, epochs
}

// checkTimeline checks that v received exactly want, in order, at
// positions from, from+1, ... of epoch, and that the room's history holds
// the same messages at the same positions.
func (e *env) checkTimeline(v *viewer, skip int, want []string, epoch string, from int64) {
	t := e.t
	t.Helper()
	got, epochs := v.received()
	got = got[skip:]
	if len(got) != len(want) {
		t.Fatalf("viewer got %d messages, want %d", len(got), len(want))
	}
	h, err := e.store.History(context.Background(), v.room, from-1, len(want))
	if err != nil {
		t.Fatal(err)
	}
	if h.Epoch != epoch || len(h.Msgs) != len(want) {
		t.Fatalf("history: epoch %q with %d messages, want %q with %d", h.Epoch, len(h.Msgs), epoch, len(want))
	}
	for i, m := range got {
		p := from + int64(i)
		if m.ID != want[i] || m.Pos != p {
			t.Fatalf("message %d: id %s pos %d, want id %s pos %d", i, m.ID, m.Pos, want[i], p)
		}
		if h.Msgs[i].ID != m.ID || h.Msgs[i].Pos != p || h.Msgs[i].Content != m.Content {
			t.Fatalf("history at %d = %+v, the viewer got %+v", p, h.Msgs[i], m)
		}
	}
	for i, ep := range epochs[skip:] {
		if ep != epoch {
			t.Fatalf("message %d came in a frame of epoch %q, want %q", skip+i, ep, epoch)
		}
	}
}

// Messages sent through logic, Kafka, job and two comets reach every viewer
// with the positions 1..N of one epoch, in order, and the room's history in
// Redis holds the same messages at the same positions. When Redis loses the
// room's last writes (a failover), the job's next batch starts a new epoch
// instead of handing out those positions again.
func TestViewersGetContiguousPositions(t *testing.T) {
	e := newEnv(t, 2)
	room := testkit.Uniq("room")
	var viewers []*viewer
	for i := range 4 {
		viewers = append(viewers, e.viewer(e.comets[i%2], room))
	}
	e.waitOnline(room, 4)
	var hooked []danmaku.Message
	hookDone := make(chan []danmaku.Message, 1000)
	e.startJob(jobConfig(), func(_ string, _, _ time.Time, msgs []danmaku.Message) { hookDone <- msgs })

	var want []string
	for i := range 20 {
		contents := make([]string, 10)
		for k := range contents {
			contents[k] = fmt.Sprintf("p%d-%d", i, k)
		}
		want = append(want, e.send(room, int64(1+i%3), contents...)...)
	}
	waitAll(t, 30*time.Second, viewers, map[string][]string{room: want})
	heads, err := e.store.Heads(context.Background(), []string{room})
	if err != nil {
		t.Fatal(err)
	}
	head := heads[room]
	if head.Epoch == "" || head.Last != 200 {
		t.Fatalf("head = %+v, want 200 positions", head)
	}
	for _, v := range viewers {
		e.checkTimeline(v, 0, want, head.Epoch, 1)
	}
	for len(hooked) < 200 {
		hooked = append(hooked, <-hookDone...)
	}
	for i, m := range hooked {
		if m.Pos != int64(i+1) {
			t.Fatalf("OnBroadcast message %d has pos %d", i, m.Pos)
		}
	}

	// A failover loses the last 50 positions: the timeline in Redis is as
	// it was after position 150.
	ctx := context.Background()
	e.rdb.HSet(ctx, "room:timeline:{"+room+"}", "seq", 150)
	e.rdb.LTrim(ctx, "room:history:{"+room+"}", 0, 149)
	more := e.send(room, 7, "after-1", "after-2", "after-3")
	waitAll(t, 30*time.Second, viewers, map[string][]string{room: append(append([]string(nil), want...), more...)})
	h, err := e.store.History(ctx, room, -1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if h.Epoch == head.Epoch || h.Last != 3 || h.First != 1 {
		t.Fatalf("after the lost writes the timeline is %+v; want a new epoch with 3 positions (old %q)", h, head.Epoch)
	}
	for _, v := range viewers {
		e.checkTimeline(v, 200, more, h.Epoch, 1)
	}
}

func TestConfigChecksHistory(t *testing.T) {
	for _, c := range []struct {
		set   func(*job.Config)
		field string
	}{
		{func(c *job.Config) { c.HistorySize = 0 }, "history_size"},
		{func(c *job.Config) { c.HistorySize = 100001 }, "history_size"},
		{func(c *job.Config) { c.HistoryTTL = 500 * time.Millisecond }, "history_ttl"},
		{func(c *job.Config) { c.HistorySpan = -time.Second }, "history_span"},
	} {
		cfg := jobConfig()
		c.set(&cfg)
		var fe *config.FieldError
		if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("want an error naming %s, got %v", c.field, err)
		}
	}
	if cfg := job.DefaultConfig(); cfg.HistorySize != 1000 || cfg.HistoryTTL != 10*time.Minute || cfg.Validate() != nil {
		t.Fatalf("defaults: %d %v %v", cfg.HistorySize, cfg.HistoryTTL, cfg.Validate())
	}
}

// A busy room's history keeps its last history_span of messages when they
// are more than history_size: with history_size 20, the 200 messages of a
// few seconds stay (all but the first batch, which the job measures the
// span from); with the span off, the last 20 do.
func TestHistoryKeepsSpan(t *testing.T) {
	for _, span := range []time.Duration{30 * time.Second, 0} {
		t.Run(fmt.Sprint(span), func(t *testing.T) {
			e := newEnv(t, 1)
			room := testkit.Uniq("room")
			v := e.viewer(e.comets[0], room)
			e.waitOnline(room, 1)
			cfg := jobConfig()
			cfg.HistorySize, cfg.HistorySpan = 20, span
			e.startJob(cfg, nil)
			var want []string
			for i := range 20 {
				contents := make([]string, 10)
				for k := range contents {
					contents[k] = fmt.Sprintf("s%d-%d", i, k)
				}
				want = append(want, e.send(room, int64(1+i%3), contents...)...)
			}
			waitAll(t, 30*time.Second, []*viewer{v}, map[string][]string{room: want})
			h, err := e.store.History(context.Background(), room, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if h.Last != 200 {
				t.Fatalf("head %d, want 200", h.Last)
			}
			// The span is measured from the first delivery's head: ten
			// messages, or more when sends came faster than the window.
			if first := int64(v.frameSizes()[0]); span > 0 && h.First > first+1 {
				t.Fatalf("history holds %d..200 with a %v span, want every message after the first batch (%d)", h.First, span, first)
			}
			if span == 0 && h.First != 181 {
				t.Fatalf("history holds %d..200 without a span, want the last 20 (181..200)", h.First)
			}
		})
	}
}
