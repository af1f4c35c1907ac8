package job_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit/wsviewer"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/internal/wordfilter"
	"github.com/danmaku/danmaku/job"
	"github.com/danmaku/danmaku/logic"
	"github.com/danmaku/danmaku/route"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Run(m)) }

const pushSecret = "test-push-secret"

// blockedWord is the harness logic's blocked word (reject mode).
const blockedWord = "badword"

// adminSecret is the harness logic's logic.admin_secret (notices).
const adminSecret = "test-admin-secret-0123"

// env is one complete system on loopback: real Redis, the embedded Kafka
// broker, comets, a logic server and any number of jobs.
type env struct {
	t      *testing.T
	rdb    redis.UniversalClient
	store  *route.Store
	broker *kafkabroker.Broker
	kafka  config.Kafka
	comets []*comet.Server
	logic  *httptest.Server
	// keys sign the tokens with which tabs prove their user to the
	// comets (user notices go only to proven users).
	keys *tokens.Keys
}

func newEnv(t *testing.T, comets int) *env {
	t.Helper()
	return newEnvWith(t, comets, redisserver.Client(t))
}

func newEnvWith(t *testing.T, comets int, rdb redis.UniversalClient) *env {
	t.Helper()
	topic := testkit.Uniq("rooms")
	b := kafkabroker.Start(t, kafkabroker.Topic(topic, 4), kafkabroker.MinSessionTimeout(time.Second))
	e := &env{t: t, rdb: rdb, store: route.New(rdb), broker: b, keys: tokens.New(t),
		kafka: config.Kafka{Brokers: b.Brokers(), Topic: topic, Partitions: 4, Replication: 1, Group: testkit.Uniq("group")}}
	for i := 0; i < comets; i++ {
		e.addComet()
	}
	lcfg := logic.DefaultConfig()
	lcfg.RateLimit, lcfg.RateBurst = 100000, 100000
	lcfg.IPRateLimit = 0 // every sender of the harness is 127.0.0.1
	lcfg.BatchTimeout = 2 * time.Millisecond
	lcfg.AdminSecret = adminSecret
	lcfg.BlockedWords = wordfilter.Config{Mode: wordfilter.ModeReject, Words: []string{blockedWord}}
	ls, err := logic.New(lcfg, logic.Deps{Store: e.store, Kafka: e.kafka})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Shutdown(context.Background()) })
	e.logic = httptest.NewServer(ls.Handler())
	t.Cleanup(e.logic.Close)
	return e
}

func (e *env) addComet() *comet.Server {
	t := e.t
	cfg := comet.DefaultConfig()
	cfg.ID = testkit.Uniq("comet")
	cfg.Listen, cfg.InternalListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Secret = pushSecret
	cfg.QueueSize = 1024
	cfg.RingSize = 4096
	cfg.LeaseRenew, cfg.LeaseTTL = time.Second, 10*time.Second
	cfg.MaxConnsPerIP = 0
	s, err := comet.New(cfg, comet.Deps{Store: e.store, Verifier: e.keys.Verifier(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	e.comets = append(e.comets, s)
	return s
}

func jobConfig() job.Config {
	c := job.DefaultConfig()
	c.Window = 50 * time.Millisecond
	c.PushSecret = pushSecret
	c.PushTimeout = 500 * time.Millisecond
	c.ClaimTTL = 2 * time.Second
	c.SessionTimeout = time.Second
	c.HeartbeatInterval = 200 * time.Millisecond
	c.RebalanceTimeout = 2 * time.Second
	c.CometRefresh = 200 * time.Millisecond
	c.CommitInterval = 50 * time.Millisecond
	c.Workers = 8
	return c
}

// runningJob is a started job and its metrics.
type runningJob struct {
	*job.Job
	reg *prometheus.Registry
}

func (e *env) startJob(cfg job.Config, hook func(string, time.Time, time.Time, []danmaku.Message)) *runningJob {
	return e.startJobWith(cfg, job.Deps{Pusher: push.NewClient(pushSecret, cfg.PushTimeout), OnBroadcast: hook})
}

// startJobWith starts a job with d, whose Kafka, Store and Registerer it
// fills in.
func (e *env) startJobWith(cfg job.Config, d job.Deps) *runningJob {
	t := e.t
	reg := prometheus.NewRegistry()
	d.Kafka, d.Store, d.Registerer = e.kafka, e.store, reg
	j, err := job.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rj := &runningJob{Job: j, reg: reg}
	t.Cleanup(func() { rj.stop(t) })
	return rj
}

// stop shuts the job down gracefully and waits for it to stop.
func (rj *runningJob) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rj.Shutdown(ctx); err != nil {
		t.Errorf("job shutdown: %v", err)
	}
}

// hungComet registers a comet with a lease and one viewer in room whose
// push endpoint accepts connections and never answers. It returns the
// comet's id and the connections it accepted, one per push.
func (e *env) hungComet(room string) (string, <-chan net.Conn) { return e.hungCometOf(room, "") }

// hungCometOf is hungComet with a viewer of user (none when empty).
func (e *env) hungCometOf(room, user string) (string, <-chan net.Conn) {
	t := e.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 64)
	var held []net.Conn // closed at cleanup, after the listener
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
			select {
			case accepted <- c:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	ctx := context.Background()
	id := testkit.Uniq("hung")
	if _, err := e.store.Heartbeat(ctx, route.CometInfo{ID: id, Addr: ln.Addr().String(), Started: time.Now()}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Register(ctx, route.Conn{ID: id + "-c1", Room: room, User: user, Comet: id}); err != nil {
		t.Fatal(err)
	}
	return id, accepted
}

// viewer is one connection of a viewer of room to one comet, with the
// summaries of what it received that job's tests check.
type viewer struct {
	*wsviewer.Viewer
	room string
}

func (e *env) viewer(c *comet.Server, room string) *viewer {
	return &viewer{Viewer: wsviewer.Once(e.t, "ws://"+c.PublicAddr()+"/ws", room, nil), room: room}
}

// messages returns the messages received, repeats included, in order.
func (v *viewer) messages() []wsviewer.Arrival {
	var out []wsviewer.Arrival
	for _, a := range v.Arrivals() {
		if a.Deleted == "" {
			out = append(out, a)
		}
	}
	return out
}

// count returns how many distinct ids of want the viewer has, and the ids
// it got more than once.
func (v *viewer) count(want []string) (have int, repeated []string) {
	seen := map[string]int{}
	for _, a := range v.messages() {
		seen[a.Msg.ID]++
	}
	for _, id := range want {
		if seen[id] > 0 {
			have++
		}
	}
	for id, n := range seen {
		if n > 1 {
			repeated = append(repeated, id)
		}
	}
	return have, repeated
}

// total returns how many distinct messages the viewer received.
func (v *viewer) total() int {
	seen := map[string]bool{}
	for _, a := range v.messages() {
		seen[a.Msg.ID] = true
	}
	return len(seen)
}

// frameSizes returns the number of messages of each msgs frame received.
func (v *viewer) frameSizes() []int {
	var sizes []int
	for _, f := range v.Frames() {
		sizes = append(sizes, f.N)
	}
	return sizes
}

// rooms returns the rooms named by the msgs frames received.
func (v *viewer) rooms() map[string]bool {
	rooms := map[string]bool{}
	for _, f := range v.Frames() {
		rooms[f.Room] = true
	}
	return rooms
}

// send posts messages to logic and returns the accepted ids.
func (e *env) send(room string, uid int64, contents ...string) []string {
	e.t.Helper()
	return e.sendWithIDs(room, uid, nil, contents...)
}

func (e *env) sendWithIDs(room string, uid int64, clientIDs []string, contents ...string) []string {
	e.t.Helper()
	type msg struct {
		Content string `json:"content"`
		MsgID   string `json:"msgId,omitempty"`
	}
	req := struct {
		RoomID   string `json:"roomId"`
		UserID   int64  `json:"userId"`
		UserName string `json:"userName"`
		Messages []msg  `json:"messages"`
	}{RoomID: room, UserID: uid, UserName: "tester"}
	for i, c := range contents {
		m := msg{Content: c}
		if clientIDs != nil {
			m.MsgID = clientIDs[i]
		}
		req.Messages = append(req.Messages, m)
	}
	body, _ := json.Marshal(req)
	resp, err := http.Post(e.logic.URL+"/logic/send", "application/json", bytes.NewReader(body))
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		MsgIDs []string `json:"msgIds"`
	}
	if resp.StatusCode != http.StatusAccepted || json.NewDecoder(resp.Body).Decode(&out) != nil {
		e.t.Fatalf("send: status %d", resp.StatusCode)
	}
	return out.MsgIDs
}

// produce writes envelopes straight to the topic, bypassing logic.
func (e *env) produce(room string, msgs ...danmaku.Message) {
	e.t.Helper()
	var recs []kafka.Message
	for _, m := range msgs {
		v, err := danmaku.MarshalEnvelope(room, m)
		if err != nil {
			e.t.Fatal(err)
		}
		recs = append(recs, kafka.Message{Key: []byte(room), Value: v})
	}
	e.write(recs...)
}

// write writes records straight to the topic.
func (e *env) write(recs ...kafka.Message) {
	e.t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(e.kafka.Brokers...), Topic: e.kafka.Topic, Balancer: &kafka.Hash{},
		BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, recs...); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

// waitAll waits until every viewer has every id of its room, then checks
// that no viewer got one twice.
func waitAll(t *testing.T, d time.Duration, viewers []*viewer, want map[string][]string) {
	t.Helper()
	testkit.SucceedsSoon(t, d, func() error {
		missing := 0
		for _, v := range viewers {
			have, _ := v.count(want[v.room])
			missing += len(want[v.room]) - have
		}
		if missing > 0 {
			return fmt.Errorf("%d deliveries missing", missing)
		}
		return nil
	})
	for _, v := range viewers {
		if _, rep := v.count(nil); len(rep) > 0 {
			t.Fatalf("viewer of %s got %d messages more than once, e.g. %s", v.room, len(rep), rep[0])
		}
		if total := v.total(); total != len(want[v.room]) {
			t.Fatalf("viewer of %s got %d distinct messages, want %d (messages of other rooms?)", v.room, total, len(want[v.room]))
		}
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				match = match && found
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// waitProgress calls fn until it returns nil, as testkit.SucceedsSoon, for a
// condition that is reached step by step at a pace a loaded machine
// varies (messages arriving): fn returns how far it got. tb fails with
// fn's last error when that did not grow for stall, or when limit has
// passed in all.
func waitProgress(tb testing.TB, stall, limit time.Duration, fn func() (int, error)) {
	tb.Helper()
	began := time.Now()
	best, moved := -1, began
	wait := time.Millisecond
	for {
		n, err := fn()
		if err == nil {
			return
		}
		if n > best {
			best, moved = n, time.Now()
		}
		switch {
		case time.Since(moved) > stall:
			tb.Fatalf("no progress for %v (at %d, after %v): %v", stall, best, time.Since(began).Round(time.Millisecond), err)
		case time.Since(began) > limit:
			tb.Fatalf("after %v: %v", limit, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}
