package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
	"github.com/danmaku/danmaku/route"
)

// A batch pushed while Kafka does not answer cannot get its positions
// record written, and then Redis is emptied: the batch was delivered, so
// job owes only the record and must not deliver the batch again (in the
// new epoch it would get new positions, and every viewer would receive it
// a second time). Every accepted message reaches every viewer exactly
// once, with no gap in the positions of an epoch.
func TestFaultPositionsOwedAcrossRedisEmptied(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1})
	room := testkit.Uniq("owed-")
	var vs []*wsviewer.Viewer
	for i := 0; i < 3; i++ {
		vs = append(vs, s.Viewer(t, room, s.Comets[0]))
	}
	send := s.Send(t, room, 600, 100)
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return firstShown(vs[0], 50) })
	s.KafkaProc.Pause(t)
	paused := true
	defer func() {
		if paused {
			s.KafkaProc.Continue(t)
		}
	}()
	// The batches the job held when Kafka stopped are pushed, and their
	// positions records fail.
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		n, err := stack.Metric(s.Jobs[0].Metrics, "danmaku_job_positions_errors_total")
		if err == nil && n < 1 {
			err = fmt.Errorf("no positions record failed yet")
		}
		return err
	})
	if err := s.RDB().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a retry of the delivery would run now
	s.KafkaProc.Continue(t)
	paused = false
	send.Wait(t, 60*time.Second)
	wsviewer.DeliveredOnce(t, 20*time.Second, send.Accepted(), vs...)
	wsviewer.NoGaps(t, vs...)
	// No message shown in the old epoch has a position in the new one: a
	// viewer that joins or resumes there would be given it again.
	h, err := route.New(s.RDB()).History(context.Background(), room, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, m := range vs[0].Shown() {
		if m.Epoch != h.Epoch {
			old[m.ID] = true
		}
	}
	var again []string
	for _, m := range h.Msgs {
		if old[m.ID] {
			again = append(again, fmt.Sprintf("%s at %d", m.ID, m.Pos))
		}
	}
	if len(old) == 0 || len(again) > 0 {
		t.Errorf("of %d messages shown before Redis was emptied, %d have positions in the new epoch %s too: %v",
			len(old), len(again), h.Epoch, again)
	}
}
