//go:build faults

package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/netlab"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
	"github.com/danmaku/danmaku/internal/tools/promtext"
)

// Soak settings, from the environment: SOAK_DURATION (default 3m; make
// soak: 30m), SOAK_SEED (default: the time), SOAK_REPORT (a file for the
// JSON report: samples, faults and totals).
const (
	soakRooms        = 8
	soakRatePerRoom  = 25 // messages a second: 200 in all
	soakViewersPerRC = 2  // viewers per room and comet
	soakFaultEvery   = time.Minute
	soakSampleEvery  = 10 * time.Second
)

// soakFault is one fault the nemesis applied.
type soakFault struct {
	At     float64 `json:"at"`
	Kind   string  `json:"kind"`
	Target string  `json:"target"`
}

// The multi-process stack at moderate load with a nemesis that picks a
// fault every minute (kill -9 and restart of a job or comet, SIGSTOP of a
// role for 5 s, Redis restarted empty, Kafka restarted, a link cut for
// 10 s), each kind once before any repeats. At the end: every message
// logic accepted shown exactly once by every viewer (resume counted),
// no gap; RSS, goroutines, open fds of every role and Redis's keys,
// sampled every 10 s, within soakBounds once steady; and, once the
// viewers left, no key without a TTL.
func TestSoak(t *testing.T) {
	dur := soakDuration(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SOAK_SEED"); v != "" {
		fmt.Sscan(v, &seed)
	}
	t.Logf("soak of %v, seed %d", dur, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := newLabStack(t, labOptions{Comets: 3, Jobs: 2})
	var vs []*wsviewer.Viewer
	var senders []*stack.Sender
	for r := range soakRooms {
		room := fmt.Sprintf("soak%d-%s", r, testkit.Uniq(""))
		vs = append(vs, viewers(t, s, room, soakViewersPerRC)...)
		senders = append(senders, s.Send(t, room, soakRatePerRoom*int(dur.Seconds()), soakRatePerRoom))
	}
	start := time.Now()
	rep := &soakReport{Seed: seed, Duration: dur.String()}
	stopSampling := rep.sampleEvery(t, s, start)
	n := &nemesis{t: t, s: s, rng: rng}
	for next := start.Add(soakFaultEvery); next.Before(start.Add(dur - 20*time.Second)); next = next.Add(soakFaultEvery) {
		time.Sleep(time.Until(next))
		f := n.strike()
		f.At = time.Since(start).Seconds()
		rep.Faults = append(rep.Faults, f)
	}
	time.Sleep(time.Until(start.Add(dur)))
	for _, sd := range senders {
		sd.Stop()
	}
	stopSampling()
	rep.account(t, senders, vs)
	rep.checkGrowth(t, dur)
	for _, v := range vs {
		v.Close()
	}
	rep.KeysWithoutTTL = keysWithoutTTL(t, s)
	rep.write(t)
	s.waitCanaryGreen(t, 60*time.Second)
}

func soakDuration(t *testing.T) time.Duration {
	d := 3 * time.Minute
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SOAK_DURATION: %v", err)
		}
	}
	return d
}

// nemesis applies faults to a lab stack, each kind once (in random order)
// before any kind repeats.
type nemesis struct {
	t   *testing.T
	s   *labStack
	rng *rand.Rand
	bag []string
}

var faultKinds = []string{"kill9", "sigstop", "redis_restart", "kafka_restart", "link_cut"}

func (n *nemesis) strike() soakFault {
	if len(n.bag) == 0 {
		n.bag = append([]string(nil), faultKinds...)
		n.rng.Shuffle(len(n.bag), func(i, j int) { n.bag[i], n.bag[j] = n.bag[j], n.bag[i] })
	}
	kind := n.bag[0]
	n.bag = n.bag[1:]
	f := soakFault{Kind: kind}
	t, s := n.t, n.s
	roles := append(append([]*stack.Proc(nil), s.Jobs...), s.Comets...)
	switch kind {
	case "kill9":
		p := roles[n.rng.IntN(len(roles))]
		f.Target = p.Name + " " + procLabel(s, p)
		p.Kill()
		time.Sleep(2 * time.Second) // a supervisor's restart delay
		p.Restart(t)
	case "sigstop":
		all := append([]*stack.Proc{s.Logic}, roles...)
		p := all[n.rng.IntN(len(all))]
		f.Target = procLabel(s, p)
		p.Pause(t)
		time.Sleep(5 * time.Second)
		p.Continue(t)
	case "redis_restart":
		f.Target = "redis (empty)"
		s.Redis.Kill()
		s.Redis.Restart(t)
	case "kafka_restart":
		f.Target = "devkafka (data kept)"
		s.Kafka.Kill()
		time.Sleep(time.Second)
		s.Kafka.Restart(t)
	case "link_cut":
		f.Target = n.cutLink()
	}
	t.Logf("nemesis: %s %s", f.Kind, f.Target)
	return f
}

// cutLink cuts one link for cutTime: job-comet, comet-Redis or
// logic-Kafka.
func (n *nemesis) cutLink() string {
	s := n.s
	j := s.jobHosts[n.rng.IntN(len(s.jobHosts))]
	c := s.cometHs[n.rng.IntN(len(s.cometHs))]
	var heal func()
	var what string
	switch n.rng.IntN(3) {
	case 0:
		heal, what = netlab.Cut(n.t, j, c, 0), j.Name+" <-> "+c.Name
	case 1:
		heal, what = netlab.Cut(n.t, c, s.svc, redisPort), c.Name+" <-> redis"
	default:
		heal, what = netlab.Cut(n.t, s.logicH, s.svc, kafkaPort), "logic <-> kafka"
	}
	time.Sleep(cutTime)
	heal()
	return what
}

// procLabel names p by its host.
func procLabel(s *labStack, p *stack.Proc) string {
	for i, q := range s.Jobs {
		if q == p {
			return s.jobHosts[i].Name
		}
	}
	for i, q := range s.Comets {
		if q == p {
			return s.cometHs[i].Name
		}
	}
	return p.Name
}

// soakReport is what a soak measured.
type soakReport struct {
	Seed           uint64      `json:"seed"`
	Duration       string      `json:"duration"`
	Faults         []soakFault `json:"faults"`
	Samples        []sample    `json:"samples"`
	Accepted       int         `json:"accepted"`
	Refused        int         `json:"refused"`
	Viewers        int         `json:"viewers"`
	Deliveries     int         `json:"deliveries"`
	Growth         []string    `json:"growth"`
	KeysWithoutTTL []string    `json:"keysWithoutTTL"`

	mu sync.Mutex
}

// sampleEvery samples every role and Redis every soakSampleEvery until
// the returned function is called.
func (r *soakReport) sampleEvery(t *testing.T, s *labStack, start time.Time) (stop func()) {
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisURL, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	done, quit := make(chan struct{}), make(chan struct{})
	targets := map[string]string{"logic": s.LogicURL + "/metrics"}
	for i, h := range s.jobHosts {
		targets[h.Name] = s.JobMetrics(i)
	}
	for i, h := range s.cometHs {
		targets[h.Name] = s.CometMetrics(i)
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(soakSampleEvery)
		defer tick.Stop()
		for {
			at := time.Since(start).Seconds()
			for name, url := range targets {
				if v, err := processSample(url); err == nil {
					r.add(sample{At: at, Proc: name, Value: v})
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if n, err := rdb.DBSize(ctx).Result(); err == nil {
				r.add(sample{At: at, Proc: "redis", Value: map[string]float64{"redis_keys": float64(n)}})
			}
			cancel()
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(quit); <-done; rdb.Close() }
}

func (r *soakReport) add(s sample) {
	r.mu.Lock()
	r.Samples = append(r.Samples, s)
	r.mu.Unlock()
}

// processSample reads a role's RSS, goroutines and open fds from its
// /metrics (the Go and process collectors), and a comet's viewers.
func processSample(url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	sc, err := promtext.Scrape(ctx, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for key, series := range map[string]string{"rss_bytes": "process_resident_memory_bytes",
		"goroutines": "go_goroutines", "open_fds": "process_open_fds"} {
		v, err := sc.Value(series)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	// A comet's viewer connections (see perViewer).
	if v, err := sc.Value("danmaku_comet_connections"); err == nil {
		out["viewers"] = v
	}
	return out, nil
}

// account waits until every viewer showed every accepted message, checks
// that none showed one twice or has a gap, and records the totals.
func (r *soakReport) account(t *testing.T, senders []*stack.Sender, vs []*wsviewer.Viewer) {
	t.Helper()
	byRoom := map[string][]string{}
	for i, sd := range senders {
		ids := sd.Accepted()
		r.Accepted += len(ids)
		r.Refused += len(sd.Refusals())
		byRoom[vs[i*len(vs)/len(senders)].Room] = ids
	}
	inRoom := map[string][]*wsviewer.Viewer{}
	for _, v := range vs {
		inRoom[v.Room] = append(inRoom[v.Room], v)
		r.Deliveries += len(byRoom[v.Room])
	}
	for room, rvs := range inRoom {
		wsviewer.DeliveredOnce(t, 90*time.Second, byRoom[room], rvs...)
	}
	wsviewer.NoGaps(t, vs...)
	r.Viewers = len(vs)
	t.Logf("soak: %d messages accepted (%d send requests refused), %d viewers, %d deliveries: 0 lost, 0 duplicated",
		r.Accepted, r.Refused, r.Viewers, r.Deliveries)
}

// checkGrowth checks the samples against soakBounds (see growth) and
// records the lines of the report.
func (r *soakReport) checkGrowth(t *testing.T, dur time.Duration) {
	t.Helper()
	lines, over := growth(r.Samples, dur)
	r.Growth = lines
	for _, line := range over {
		t.Errorf("growth beyond the bound: %s", line)
	}
	t.Logf("growth once steady:\n%s", strings.Join(r.Growth, "\n"))
}

// keysWithoutTTL waits until Redis holds no key without a TTL (the
// viewers left, so their routes go) but comets:index, the set of comet ids
// the janitor walks, which may hold only the stack's comets; it returns
// the keys still there after 30 s.
func keysWithoutTTL(t *testing.T, s *labStack) []string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisURL})
	defer rdb.Close()
	var left []string
	err := testkit.Soon(30*time.Second, func() error {
		left = left[:0]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			if k == "comets:index" {
				if n, err := rdb.SCard(ctx, k).Result(); err != nil || n > int64(len(s.Comets)) {
					left = append(left, fmt.Sprintf("%s (%d ids, %v)", k, n, err))
				}
				continue
			}
			if ttl, err := rdb.TTL(ctx, k).Result(); err == nil && ttl == -1 {
				left = append(left, k)
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("%d keys without TTL, e.g. %v", len(left), left[:min(5, len(left))])
		}
		return nil
	})
	if err != nil {
		t.Errorf("after the viewers left: %v", err)
	}
	return left
}

func (r *soakReport) write(t *testing.T) {
	path := os.Getenv("SOAK_REPORT")
	if path == "" {
		return
	}
	b, err := json.MarshalIndent(r, "", " ")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Errorf("SOAK_REPORT: %v", err)
	}
}
