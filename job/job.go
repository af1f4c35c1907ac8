package job

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/route"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// Pusher sends one encoded batch to one comet's internal endpoint and
// returns how many viewers it reached. push.Client implements it.
type Pusher interface {
	Push(ctx context.Context, addr string, body []byte) (int, error)
}

// Options wires a Job.
type Options struct {
	Config Config
	Kafka  config.Kafka
	Store  *route.Store
	Pusher Pusher
	Log    *zap.Logger
	// Registerer receives the job's metrics; nil means a private registry.
	Registerer prometheus.Registerer
	// OnBroadcast, when set, is called after every delivered room batch with
	// the interval during which this job held the room's broadcast lock.
	OnBroadcast func(room string, locked, unlocked time.Time, msgs []danmaku.Message)
}

// Job consumes the room topic and delivers each room's messages to the
// comets that hold its viewers. See the package documentation.
type Job struct {
	cfg    Config
	kcfg   config.Kafka
	store  *route.Store
	pusher Pusher
	log    *zap.Logger
	m      *metrics
	hook   func(string, time.Time, time.Time, []danmaku.Message)
	owner  string

	reader *kafka.Reader
	comets atomic.Pointer[map[string]route.CometInfo]

	in      chan record
	work    chan *flush
	results chan *flush

	abortOnce sync.Once
	aborted   chan struct{}
	workCtx   context.Context
	stopWork  context.CancelFunc
	wg        sync.WaitGroup

	quarantineMu   sync.Mutex
	quarantineTill map[string]time.Time // comets left out after failed pushes

	commitMu   sync.Mutex
	toCommit   map[int]int64
	commitWake chan struct{}
}

// record is one consumed Kafka record, decoded.
type record struct {
	env  danmaku.Envelope
	err  error
	part int
	off  int64
}

// New checks the options and builds a Job; Run starts it.
func New(o Options) (*Job, error) {
	if err := config.Validate(&o.Config); err != nil {
		return nil, err
	}
	if err := config.Validate(&o.Kafka); err != nil {
		return nil, err
	}
	if len(o.Kafka.Brokers) == 0 {
		return nil, &config.FieldError{Field: "kafka.brokers", Message: "must not be empty"}
	}
	if o.Store == nil || o.Pusher == nil {
		return nil, errors.New("job: Store and Pusher are required")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	owner := o.Config.Owner
	if owner == "" {
		var b [6]byte
		rand.Read(b[:])
		owner = "job-" + hex.EncodeToString(b[:])
	}
	if err := danmaku.CheckID("job.owner", owner); err != nil {
		return nil, err
	}
	j := &Job{
		cfg: o.Config, kcfg: o.Kafka, store: o.Store, pusher: o.Pusher, log: o.Log,
		hook: o.OnBroadcast, owner: owner,
		in:             make(chan record, 256),
		work:           make(chan *flush, o.Config.Workers),
		results:        make(chan *flush, o.Config.Workers),
		aborted:        make(chan struct{}),
		toCommit:       map[int]int64{},
		quarantineTill: map[string]time.Time{},
		commitWake:     make(chan struct{}, 1),
	}
	j.workCtx, j.stopWork = context.WithCancel(context.Background())
	j.reader = kafka.NewReader(kafka.ReaderConfig{
		Brokers:           o.Kafka.Brokers,
		GroupID:           o.Kafka.Group,
		Topic:             o.Kafka.Topic,
		MinBytes:          1,
		MaxBytes:          8 << 20,
		MaxWait:           o.Config.MaxWait,
		CommitInterval:    0, // commits are explicit and synchronous
		HeartbeatInterval: o.Config.HeartbeatInterval,
		SessionTimeout:    o.Config.SessionTimeout,
		RebalanceTimeout:  o.Config.RebalanceTimeout,
		StartOffset:       kafka.FirstOffset,
		MaxAttempts:       3,
		ErrorLogger:       kafka.LoggerFunc(o.Log.Sugar().Debugf),
		Logger:            groupLogger(o.Log),
	})
	j.m = newMetrics(o.Registerer, func() float64 { return float64(j.reader.Stats().Lag) })
	empty := map[string]route.CometInfo{}
	j.comets.Store(&empty)
	return j, nil
}

// Owner returns the id this job uses in dedup claims.
func (j *Job) Owner() string { return j.owner }

// Run consumes until ctx is cancelled, then shuts down gracefully: stop
// fetching, deliver what is buffered (bounded by DrainTimeout), commit, and
// leave the consumer group. It returns nil after a graceful stop.
func (j *Job) Run(ctx context.Context) error {
	j.refreshComets(ctx)
	fetchCtx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()

	var loops sync.WaitGroup
	loops.Add(3)
	go func() { defer loops.Done(); j.fetchLoop(fetchCtx) }()
	go func() { defer loops.Done(); j.cometLoop(fetchCtx) }()
	go func() { defer loops.Done(); j.commitLoop() }()
	for i := 0; i < j.cfg.Workers; i++ {
		j.wg.Add(1)
		go j.worker()
	}

	p := newProcessor(j)
	p.run(ctx.Done())

	stopFetch()
	close(j.work)
	j.wg.Wait()
	j.stopWork()
	if !j.isAborted() {
		j.queueCommits(p.offsets.commits())
	}
	close(j.commitWake) // the commit loop commits what is queued and exits
	loops.Wait()
	return j.reader.Close()
}

// Abort stops the job as a crash would: nothing more is delivered or
// committed; what was consumed and not committed is redelivered to the next
// member of the group. Run returns after Abort.
func (j *Job) Abort() {
	j.abortOnce.Do(func() {
		close(j.aborted)
		j.stopWork()
	})
}

func (j *Job) isAborted() bool {
	select {
	case <-j.aborted:
		return true
	default:
		return false
	}
}

// fetchLoop reads records and hands them to the processor. A broker that is
// down makes FetchMessage fail; the loop retries with backoff.
func (j *Job) fetchLoop(ctx context.Context) {
	defer close(j.in)
	backoff := j.cfg.RetryMin
	for {
		m, err := j.reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil || j.isAborted() {
				return
			}
			j.log.Warn("kafka fetch failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(backoff*2, j.cfg.RetryMax)
			continue
		}
		backoff = j.cfg.RetryMin
		env, derr := danmaku.UnmarshalEnvelope(m.Value)
		select {
		case j.in <- record{env: env, err: derr, part: m.Partition, off: m.Offset}:
		case <-ctx.Done():
			return
		}
	}
}

// queueCommits merges partition positions into the set the commit loop
// sends next.
func (j *Job) queueCommits(c map[int]int64) {
	if len(c) == 0 {
		return
	}
	j.commitMu.Lock()
	for p, off := range c {
		if off > j.toCommit[p] {
			j.toCommit[p] = off
		}
	}
	j.commitMu.Unlock()
	select {
	case j.commitWake <- struct{}{}:
	default:
	}
}

// commitLoop commits queued positions off the processor's goroutine, so a
// slow broker never stalls deliveries. It exits when commitWake is closed,
// after a last commit.
func (j *Job) commitLoop() {
	for range j.commitWake {
		j.commitQueued()
	}
	j.commitQueued()
}

func (j *Job) commitQueued() {
	if j.isAborted() {
		return
	}
	j.commitMu.Lock()
	pending := j.toCommit
	j.toCommit = map[int]int64{}
	j.commitMu.Unlock()
	if len(pending) == 0 {
		return
	}
	msgs := make([]kafka.Message, 0, len(pending))
	for p, next := range pending {
		// kafka-go commits the given offset + 1.
		msgs = append(msgs, kafka.Message{Topic: j.kcfg.Topic, Partition: p, Offset: next - 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := j.reader.CommitMessages(ctx, msgs...); err != nil {
		// After a rebalance the partition may belong to another member, which
		// then redelivers from its last commit: dedup covers that.
		j.m.commitErrors.Inc()
		j.log.Debug("commit failed", zap.Error(err))
	}
}

// cometLoop keeps the live-comet cache fresh and, on the janitor interval,
// removes the routes of comets whose lease expired.
func (j *Job) cometLoop(ctx context.Context) {
	refresh := time.NewTicker(j.cfg.CometRefresh)
	defer refresh.Stop()
	var janitor <-chan time.Time
	if j.cfg.JanitorInterval > 0 {
		t := time.NewTicker(j.cfg.JanitorInterval)
		defer t.Stop()
		janitor = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
			j.refreshComets(ctx)
		case <-janitor:
			j.removeDeadComets(ctx)
		}
	}
}

func (j *Job) refreshComets(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	live, err := j.store.LiveComets(ctx)
	if err != nil {
		j.log.Debug("list live comets", zap.Error(err))
		return
	}
	j.comets.Store(&live)
}

func (j *Job) removeDeadComets(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dead, err := j.store.DeadComets(ctx)
	if err != nil {
		return
	}
	for _, id := range dead {
		n, err := j.store.RemoveComet(ctx, id)
		if err != nil {
			j.log.Warn("remove dead comet", zap.String("comet", id), zap.Error(err))
			continue
		}
		j.log.Info("removed routes of dead comet", zap.String("comet", id), zap.Int("connections", n))
	}
}

// roomState is the processor's view of one room.
type roomState struct {
	name      string
	queue     []pending // waiting messages, oldest first
	windowEnd time.Time // no new broadcast before this
	due       time.Time // scheduled dispatch; zero when none
	inflight  bool
	failures  int // failed deliveries in a row
}

type pending struct {
	msg  danmaku.Message
	part int
	off  int64
	// waited: the message arrived while its room's window ran or a
	// delivery was in flight, so it goes out in a trailing batch.
	waited bool
}

// dueHeap orders scheduled rooms by due time; entries whose time no longer
// matches the room's are stale and skipped.
type dueEntry struct {
	at   time.Time
	room *roomState
}
type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(a, b int) bool { return h[a].at.Before(h[b].at) }
func (h dueHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

var _ heap.Interface = (*dueHeap)(nil)
