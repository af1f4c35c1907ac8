package job_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit/wsviewer"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/testkit"
)

// tab is one WebSocket connection of a user (uid, proven by a token), in a
// room or in none, that records the notices it receives; uid "" connects
// without a user.
type tab struct{ *wsviewer.Viewer }

func (e *env) tab(c *comet.Server, uid, room string) *tab {
	t := e.t
	q := url.Values{}
	if uid != "" {
		n, err := strconv.ParseInt(uid, 10, 64)
		if err != nil {
			t.Fatalf("uid %q: %v", uid, err)
		}
		q.Set("uid", uid)
		q.Set("token", e.keys.Token(t, n, "", nil))
	}
	return &tab{wsviewer.Once(t, "ws://"+c.PublicAddr()+"/ws", room, q)}
}

// ids returns the ids of the notices of op received, in arrival order.
func (tb *tab) ids(op string) []string {
	var ids []string
	for _, n := range tb.Notices(op) {
		ids = append(ids, n.ID)
	}
	return ids
}

// data returns the data of the notice id received last, "" for none.
func (tb *tab) data(id string) string {
	data := ""
	for _, op := range []string{danmaku.OpUser, danmaku.OpAll} {
		for _, n := range tb.Notices(op) {
			if n.ID == id {
				data = string(n.Data)
			}
		}
	}
	return data
}

// has reports whether the tab got every id of op once, and no other notice
// of op.
func (tb *tab) has(op string, ids []string) error {
	got := tb.ids(op)
	want := append([]string(nil), ids...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s notices %d (%v...), want %d", op, len(got), got[:min(len(got), 3)], len(want))
	}
	return nil
}

// waitUsers waits until user:online lists n connections of each user.
func (e *env) waitUsers(n int, users ...string) {
	e.t.Helper()
	testkit.SucceedsSoon(e.t, 5*time.Second, func() error {
		for _, u := range users {
			comets, err := e.store.UserComets(context.Background(), u)
			if err != nil {
				return err
			}
			total := int64(0)
			for _, c := range comets {
				total += c
			}
			if total != int64(n) {
				return fmt.Errorf("user %s has %d connections, want %d", u, total, n)
			}
		}
		return nil
	})
}

// notify posts a notice request (path /logic/push/user or
// /logic/broadcast) with the admin secret and returns the accepted ids.
func (e *env) notify(path, body string) []string {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.logic.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	var out struct {
		MsgIDs []string `json:"msgIds"`
	}
	if resp.StatusCode != http.StatusAccepted || json.NewDecoder(resp.Body).Decode(&out) != nil {
		e.t.Fatalf("%s: status %d", path, resp.StatusCode)
	}
	return out.MsgIDs
}

func pushBody(user string, contents ...string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"userId":%s,"messages":[`, user)
	for i, c := range contents {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"content":%q,"data":{"i":%d}}`, c, i)
	}
	b.WriteString("]}")
	return b.String()
}

// committed is the sum of the group's committed offsets over the topic's
// partitions: the number of records finished when nothing else was written.
func (e *env) committed() (int64, error) {
	c := &kafka.Client{Addr: kafka.TCP(e.kafka.Brokers...), Timeout: 5 * time.Second}
	parts := make([]int, e.kafka.Partitions)
	for i := range parts {
		parts[i] = i
	}
	res, err := c.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: e.kafka.Group,
		Topics: map[string][]int{e.kafka.Topic: parts}})
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, p := range res.Topics[e.kafka.Topic] {
		if p.Error != nil {
			return 0, p.Error
		}
		sum += max(p.CommittedOffset, 0)
	}
	return sum, nil
}

// A user with three tabs on two comets gets each notice once per tab,
// whatever room each tab is in (one in none), with its data; another user
// on the same comets gets none.
func TestUserNoticeReachesEveryTab(t *testing.T) {
	e := newEnv(t, 2)
	u, other := fmt.Sprint(time.Now().UnixNano()%1e9+1000), fmt.Sprint(time.Now().UnixNano()%1e9+2000)
	r1, r2 := testkit.Uniq("room"), testkit.Uniq("room")
	tabs := []*tab{e.tab(e.comets[0], u, r1), e.tab(e.comets[0], u, ""), e.tab(e.comets[1], u, r2)}
	bystander := e.tab(e.comets[1], other, r1)
	// The registry lists connections in rooms: user:online names the
	// user's tabs on both comets; the comet that holds the tab in no room
	// finds it by the user id.
	e.waitUsers(2, u)
	e.waitUsers(1, other)
	j := e.startJob(jobConfig(), nil)
	ids := e.notify("/logic/push/user", pushBody(u, "one", "two", "three"))
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		for i, tb := range tabs {
			if err := tb.has(danmaku.OpUser, ids); err != nil {
				return fmt.Errorf("tab %d: %w", i, err)
			}
		}
		return nil
	})
	data := tabs[1].data(ids[1])
	if data != `{"i":1}` {
		t.Fatalf("data of %s: %q", ids[1], data)
	}
	time.Sleep(300 * time.Millisecond)
	for i, tb := range tabs {
		if err := tb.has(danmaku.OpUser, ids); err != nil {
			t.Fatalf("tab %d later: %v", i, err)
		}
	}
	if err := bystander.has(danmaku.OpUser, nil); err != nil {
		t.Fatalf("another user: %v", err)
	}
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if n := counter(t, j.reg, "danmaku_job_notices_total", "op", "user", "result", "delivered"); n != 3 {
			return fmt.Errorf("delivered notices counted %v, want 3", n)
		}
		return nil
	})
}

// A notice to a user without a connection is counted (no_route), not
// retried, and its offset is committed.
func TestUserNoticeOfflineIsCounted(t *testing.T) {
	e := newEnv(t, 1)
	j := e.startJob(jobConfig(), nil)
	e.notify("/logic/push/user", pushBody("987654321", "nobody home", "still nobody"))
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if n := counter(t, j.reg, "danmaku_job_dropped_total", "reason", "no_route"); n != 2 {
			return fmt.Errorf("no_route %v, want 2", n)
		}
		if n, err := e.committed(); err != nil || n != 2 {
			return fmt.Errorf("committed %d records (%v), want 2", n, err)
		}
		return nil
	})
	if n := counter(t, j.reg, "danmaku_job_notices_total", "op", "user", "result", "no_route"); n != 2 {
		t.Fatalf("no_route notices %v, want 2", n)
	}
	if n := counter(t, j.reg, "danmaku_job_retries_total"); n != 0 {
		t.Fatalf("retries %v, want none", n)
	}
}

// A broadcast reaches every connection of every comet exactly once: in
// rooms, in none, with a user id and without; a copy written again to
// Kafka (a redelivery) is not shown again.
func TestBroadcastReachesEveryConnection(t *testing.T) {
	e := newEnv(t, 2)
	room := testkit.Uniq("room")
	var tabs []*tab
	for i := 0; i < 6; i++ {
		r := room
		if i == 5 {
			r = ""
		}
		tabs = append(tabs, e.tab(e.comets[i%2], fmt.Sprint(3000+i), r))
	}
	tabs = append(tabs, e.tab(e.comets[1], "", room)) // a viewer without a user id
	e.waitOnline(room, 6)
	j := e.startJob(jobConfig(), nil)
	ids := e.notify("/logic/broadcast", `{"messages":[{"content":"maintenance at 3:00","msgId":"b1"},{"data":{"banner":"gift"}}]}`)
	v, err := danmaku.MarshalNotice("", danmaku.Notice{ID: ids[0], TS: time.Now().UnixMilli(), Content: "again"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		for i, tb := range tabs {
			if err := tb.has(danmaku.OpAll, ids); err != nil {
				return fmt.Errorf("connection %d: %w", i, err)
			}
		}
		return nil
	})
	e.write(kafka.Message{Key: []byte(danmaku.BroadcastKey), Value: v})
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if n := counter(t, j.reg, "danmaku_job_notices_total", "op", "all", "result", "duplicate"); n != 1 {
			return fmt.Errorf("duplicate broadcasts %v, want 1", n)
		}
		return nil
	})
	for i, tb := range tabs {
		if err := tb.has(danmaku.OpAll, ids); err != nil {
			t.Fatalf("connection %d after the redelivery: %v", i, err)
		}
	}
}

// A job that crashes in the middle of a stream of user notices loses
// none: the next member of the group delivers what the first had not
// finished, and no tab shows one twice.
func TestUserNoticesSurviveACrash(t *testing.T) {
	e := newEnv(t, 2)
	users := []string{"41001", "41002", "41003", "41004"}
	var tabs []*tab
	for i, u := range users {
		tabs = append(tabs, e.tab(e.comets[i%2], u, testkit.Uniq("room")), e.tab(e.comets[(i+1)%2], u, testkit.Uniq("room")))
	}
	e.waitUsers(2, users...)
	cfg := jobConfig()
	a := e.startJob(cfg, nil)
	want := map[string][]string{}
	var wmu sync.Mutex
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; i < 120; i++ {
			u := users[i%len(users)]
			ids := e.notify("/logic/push/user", pushBody(u, "a", "b", "c", "d", "e"))
			wmu.Lock()
			want[u] = append(want[u], ids...)
			wmu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		n := len(tabs[0].ids(danmaku.OpUser))
		if n < 30 {
			return fmt.Errorf("%d notices delivered, waiting for 30", n)
		}
		return nil
	})
	a.Crash()
	<-a.Done()
	before := len(tabs[0].ids(danmaku.OpUser))
	if before >= 150 {
		t.Fatal("every notice was delivered before the crash; the test proves nothing")
	}
	e.startJob(cfg, nil)
	<-sent
	wmu.Lock()
	defer wmu.Unlock()
	testkit.SucceedsSoon(t, 60*time.Second, func() error {
		for i, tb := range tabs {
			if err := tb.has(danmaku.OpUser, want[users[i/2]]); err != nil {
				return fmt.Errorf("tab %d of user %s: %w", i, users[i/2], err)
			}
		}
		return nil
	})
}

// A comet that never answers a user's notice, while another comet of the
// user takes it, is left out like a room's comet: its share is counted
// (comet_failed), the tab on the other comet gets the notice, and the
// next notice goes to the good comet only.
func TestUserNoticeFailedCometLeftOut(t *testing.T) {
	e := newEnv(t, 1)
	u, room := "61001", testkit.Uniq("room")
	good := e.tab(e.comets[0], u, room)
	_, accepted := e.hungCometOf(room, u)
	e.waitUsers(2, u)
	j := e.startJob(jobConfig(), nil)
	first := e.notify("/logic/push/user", pushBody(u, "one"))
	select {
	case <-accepted:
	case <-time.After(20 * time.Second):
		t.Fatal("the hung comet was never pushed to")
	}
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if n := counter(t, j.reg, "danmaku_job_dropped_total", "reason", "comet_failed"); n != 1 {
			return fmt.Errorf("comet_failed %v, want 1", n)
		}
		return good.has(danmaku.OpUser, first)
	})
	second := e.notify("/logic/push/user", pushBody(u, "two"))
	testkit.SucceedsSoon(t, 20*time.Second, func() error { return good.has(danmaku.OpUser, append(first, second...)) })
	if n := counter(t, j.reg, "danmaku_job_dropped_total", "reason", "comet_failed"); n != 1 {
		t.Fatalf("comet_failed %v after the second notice, want still 1 (the comet is left out)", n)
	}
	// The counter moves after the push and the marking round trip, so a
	// moment after the tab has the frame.
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if n := counter(t, j.reg, "danmaku_job_notices_total", "op", "user", "result", "delivered"); n != 2 {
			return fmt.Errorf("delivered notices %v, want 2", n)
		}
		return nil
	})
}
