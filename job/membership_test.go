package job_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/danmaku/danmaku/internal/testkit"
)

// A job that has left its consumer group's generation without knowing it
// (its heartbeats are answered but never reach the group, as for a job
// paused past its session whose wake-up beats the heartbeat's error)
// delivers nothing once its last proof of membership is older than three
// quarters of job.processed_ttl. The job that took its partitions over
// delivers them, and after processed_ttl their claims are gone: delivered
// then by the first job, they would get new positions and reach every
// viewer a second time.
func TestNoDeliveryWithoutProofOfMembership(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("zombie-")
	v := e.viewer(e.comets[0], room)
	cfg := jobConfig()
	cfg.ProcessedTTL = time.Second // proof needed within 750 ms
	a := e.startJob(cfg, nil)
	first := e.send(room, 1, "while a is the only member")
	waitAll(t, 15*time.Second, []*viewer{v}, map[string][]string{room: first})
	// From now on a's heartbeats are answered here, and the group never
	// sees them: when b joins, a does not take part in the rebalance and
	// loses its partitions, but keeps fetching and delivering.
	var mu sync.Mutex
	zombie := ""
	e.broker.Cluster().ControlKey(kmsg.Heartbeat.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		e.broker.Cluster().KeepControl()
		req := r.(*kmsg.HeartbeatRequest)
		mu.Lock()
		defer mu.Unlock()
		if zombie == "" {
			zombie = req.MemberID // b has not joined yet
		}
		if req.MemberID != zombie {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.Version = req.Version
		return resp, nil, true
	})
	time.Sleep(500 * time.Millisecond) // a heartbeat of a's was seen
	b := e.startJob(cfg, nil)
	// The rebalance waits for a (RebalanceTimeout), then goes on without
	// it: b is the group's only member.
	cl := &kafka.Client{Addr: kafka.TCP(e.kafka.Brokers...), Timeout: 2 * time.Second}
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		res, err := cl.DescribeGroups(context.Background(), &kafka.DescribeGroupsRequest{GroupIDs: []string{e.kafka.Group}})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if g := res.Groups[0]; g.GroupState != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID == zombie {
			return fmt.Errorf("group %s with %d members", g.GroupState, len(g.Members))
		}
		return nil
	})
	second := append(first, e.send(room, 1, "after b took over")...)
	waitAll(t, 15*time.Second, []*viewer{v}, map[string][]string{room: second})
	before := counter(t, a.reg, "danmaku_job_broadcasts_total")
	// a fetches these too; b delivers them, a must not.
	all := append(second, e.send(room, 1, "one", "two", "three")...)
	waitAll(t, 15*time.Second, []*viewer{v}, map[string][]string{room: all})
	time.Sleep(2 * cfg.Window)
	time.Sleep(time.Second) // a's retries, if any, run meanwhile
	if n := counter(t, a.reg, "danmaku_job_broadcasts_total"); n != before {
		t.Errorf("the job outside the generation delivered %v batches", n-before)
	}
	if n := counter(t, a.reg, "danmaku_job_retries_total", "reason", "membership"); n == 0 {
		t.Error("the job outside the generation never held a delivery back for want of proof")
	}
	if n := counter(t, b.reg, "danmaku_job_broadcasts_total"); n == 0 {
		t.Error("the member of the generation delivered nothing")
	}
	if _, repeated := v.count(all); len(repeated) > 0 {
		t.Errorf("shown more than once: %v", repeated)
	}
}
