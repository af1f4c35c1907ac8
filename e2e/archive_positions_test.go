package e2e_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/pgserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

// newPositionsStack runs a stack of one comet (logic, job, a real
// redis-server) and the archive binary on a PostgreSQL of the test's own,
// the archive with short timings and args, and waits until it consumes.
func newPositionsStack(t *testing.T, args ...string) (*stack.Stack, *archiveStack) {
	pg := pgserver.Start(t)
	dsn := pg.DSN(t, "archive")
	s := stack.New(t, stack.Options{Comets: 1,
		Logic: []string{"-logic.admin_secret", archiveAdminSecret, "-logic.archive_dsn", dsn}})
	arcAddr := testkit.FreeAddr(t)
	arc := start(t, "archive", append([]string{"-config", "configs/archive.yaml", "-kafka.brokers", s.Kafka, "-archive.dsn", dsn,
		"-archive.metrics_addr", arcAddr, "-archive.session_timeout", "1s", "-archive.heartbeat_interval", "200ms",
		"-archive.rebalance_timeout", "2s", "-archive.batch_wait", "20ms", "-archive.write_timeout", "2s"}, args...)...)
	a := &archiveStack{logicURL: s.LogicURL, arcMetrics: "http://" + arcAddr + "/metrics", arc: arc, pg: pg}
	a.waitReady(t)
	return s, a
}

// TestArchivePositions: a stream's comments go through logic, job and a
// comet to a viewer while the archive binary stores them in PostgreSQL;
// job is killed with SIGKILL and stays down longer than the archive's
// position_wait (so comments are stored without their position and get it
// when the restarted job delivers them), and the archive is killed with
// SIGKILL and restarted while job is down (so what it stored without a
// position is found again in the database). Once the stream ended, every
// accepted comment is replayed once, at the position the viewer received
// it at.
func TestArchivePositions(t *testing.T) {
	s, a := newPositionsStack(t, "-archive.position_wait", "1s")
	arc := a.arc

	room := testkit.Uniq("vod")
	v := s.Viewer(t, room, s.Comets[0])
	defer v.Close()
	stream := a.startStream(t, room)
	var (
		mu       sync.Mutex
		accepted []string
	)
	stop, sent := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if ids, err := stack.Post(s.LogicURL, room, int64(1+i%20), "viewer", []string{fmt.Sprint("comment ", i)}); err == nil {
				mu.Lock()
				accepted = append(accepted, ids...)
				mu.Unlock()
			}
		}
	}()
	job := s.Jobs[0]
	time.Sleep(time.Second)
	job.Kill()
	time.Sleep(2 * time.Second) // comments wait 1 s for positions, then are stored without
	arc.Kill()
	arc.Restart(t)
	a.waitReady(t)
	time.Sleep(time.Second)
	job.Restart(t)
	time.Sleep(2 * time.Second)
	close(stop)
	<-sent

	mu.Lock()
	defer mu.Unlock()
	testkit.SucceedsSoon(t, 60*time.Second, func() error {
		if miss := v.Missing(accepted); len(miss) > 0 {
			return fmt.Errorf("the viewer has not shown %d of %d", len(miss), len(accepted))
		}
		return nil
	})
	shown := map[string]int64{}
	for _, m := range v.Shown() {
		shown[m.ID] = m.Pos
	}
	seg := a.endedSegment(t, room, stream)
	got := map[string]int64{}
	var wrong, twice []string
	for _, c := range seg.Comments {
		if _, ok := got[c.ID]; ok {
			twice = append(twice, c.ID)
		}
		got[c.ID] = c.Pos
		if c.Pos != shown[c.ID] {
			wrong = append(wrong, fmt.Sprintf("%s stored at %d, shown at %d", c.ID, c.Pos, shown[c.ID]))
		}
	}
	var missing []string
	for _, id := range accepted {
		if _, ok := got[id]; !ok {
			missing = append(missing, id)
		}
	}
	t.Logf("%d accepted, %d replayed; stored without a position and given it later: %v", len(accepted), len(seg.Comments),
		scrape(a.arcMetrics, `danmaku_archive_positions_total{result="late"}`))
	if len(accepted) < 100 || len(missing)+len(twice)+len(wrong) > 0 || len(seg.Comments) != len(accepted) {
		t.Fatalf("%d accepted, %d replayed\nmissing %v\ntwice %v\nwrong positions %v", len(accepted), len(seg.Comments), missing, twice, wrong)
	}
}

// TestArchiveEpochs: the room's timeline starts over in the middle of a
// stream (its redis-server is killed and restarted empty between two
// batches of comments, so positions count from 1 again in a new epoch).
// The archive binary stores both batches in PostgreSQL, each comment with
// the position and the epoch the viewer received it at: the two epochs'
// positions overlap and stay apart.
func TestArchiveEpochs(t *testing.T) {
	s, a := newPositionsStack(t)

	room := testkit.Uniq("vod")
	v := s.Viewer(t, room, s.Comets[0])
	defer v.Close()
	stream := a.startStream(t, room)
	var accepted []string
	batch := func(name string) {
		var ids []string
		for i := range 20 {
			testkit.SucceedsSoon(t, 20*time.Second, func() error {
				got, err := stack.Post(s.LogicURL, room, int64(1+i), "viewer", []string{fmt.Sprint(name, " ", i)})
				ids = append(ids, got...)
				return err
			})
		}
		accepted = append(accepted, ids...)
		testkit.SucceedsSoon(t, 30*time.Second, func() error {
			if miss := v.Missing(ids); len(miss) > 0 {
				return fmt.Errorf("the viewer has not shown %d of batch %s", len(miss), name)
			}
			return nil
		})
	}
	batch("before")
	if err := s.Redis.Restart(); err != nil {
		t.Fatal(err)
	}
	batch("after")

	shown := map[string]string{}
	epochs := map[string]bool{}
	for _, m := range v.Shown() {
		shown[m.ID] = fmt.Sprintf("%s/%d", m.Epoch, m.Pos)
		epochs[m.Epoch] = true
	}
	if len(epochs) != 2 {
		t.Fatalf("the viewer saw %d epochs, want 2 (the timeline started over once)", len(epochs))
	}
	seg := a.endedSegment(t, room, stream)
	got := map[string]string{}
	for _, c := range seg.Comments {
		got[c.ID] = fmt.Sprintf("%s/%d", c.Epoch, c.Pos)
	}
	var wrong []string
	for _, id := range accepted {
		if got[id] != shown[id] || shown[id] == "" {
			wrong = append(wrong, fmt.Sprintf("%s stored at %q, shown at %q", id, got[id], shown[id]))
		}
	}
	if len(seg.Comments) != len(accepted) || len(wrong) > 0 {
		t.Fatalf("%d accepted, %d replayed; wrong epoch/position: %v", len(accepted), len(seg.Comments), wrong)
	}
}
