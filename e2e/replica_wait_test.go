package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// With job.wait_replicas 1 a batch is pushed only once the replica of its
// room's master holds the positions it was given. Messages accepted while
// that replica is stopped (SIGSTOP) wait; the master is then killed
// (SIGKILL) and the replica, resumed, is promoted. Every accepted message
// reaches the viewer exactly once, without gaps, and the room's history on
// the promoted master holds every one of them in order. Without the wait
// the job pushed those messages with positions only the dead master held:
// the promoted replica's timeline was behind, a new epoch started, and the
// history lost them.
func TestReplicaWaitSurvivesFailover(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1, Jobs: 1,
		Cluster: &redisserver.ClusterSpec{Masters: 3, Replicas: 1, NodeTimeout: nodeTimeout},
		Job:     []string{"-job.wait_replicas", "1", "-job.replica_timeout", "400ms"}})
	c := s.Cluster
	room := testkit.Uniq("room-")
	slot := redisserver.Slot("{" + room + "}")
	var master, replica *redisserver.Server
	testkit.SucceedsSoon(t, 10*time.Second, func() (err error) {
		if master, err = c.Master(slot); err != nil {
			return err
		}
		replica, err = c.ReplicaOf(master)
		return err
	})
	v := s.Viewer(t, room, s.Comets[0])
	post := func(prefix string) []string {
		t.Helper()
		ids, err := stack.Post(s.LogicURL, room, 7001, "ann", []string{prefix + "1", prefix + "2", prefix + "3"})
		if err != nil {
			t.Fatalf("post %s: %v", prefix, err)
		}
		return ids
	}
	before := post("before")
	wsviewer.DeliveredOnce(t, 15*time.Second, before, v)

	resume := replica.PauseUntilResumed(t)
	// A stopped replica still receives the replication stream into its
	// socket buffers and applies it on resume; fill them first, so what
	// follows stays in the master's memory and dies with it.
	fill := strings.Repeat("x", 8<<20)
	for i := 0; i < 4; i++ {
		if err := s.RDB().Set(context.Background(), fmt.Sprintf("{%s}:fill:%d", room, i), fill, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	during := append(post("during-a"), post("during-b")...)
	time.Sleep(time.Second) // several replica timeouts: the job retries
	master.Kill()
	resume()
	if _, err := c.WaitPromoted(slot, master, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(before), during...)
	wsviewer.DeliveredOnce(t, 20*time.Second, all, v)
	wsviewer.NoGaps(t, v)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		got, err := historyIDs(s.LogicURL, room)
		if err != nil {
			return err
		}
		if !slices.Equal(got, all) {
			return fmt.Errorf("history on the promoted master %v, want %v", got, all)
		}
		return nil
	})
}

// historyIDs reads room's history through logic, oldest first.
func historyIDs(logicURL, room string) ([]string, error) {
	resp, err := http.Get(logicURL + "/logic/history?since=0&limit=1000&roomId=" + room)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /logic/history: %s", resp.Status)
	}
	var h struct{ Messages []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(h.Messages))
	for _, m := range h.Messages {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
