package job

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
)

// Deps are what a Job works with besides its Config.
type Deps struct {
	// Kafka names the brokers, the room topic and the consumer group.
	Kafka config.Kafka
	// Store holds the delivery guards and the comets' routes and leases.
	Store Store
	// Pusher sends batches to comets (push.Client).
	Pusher Pusher
	// Log defaults to a no-op logger.
	Log *zap.Logger
	// Registerer receives the job's metrics; nil means a private registry.
	Registerer prometheus.Registerer
	// OnBroadcast, when set, is called after every delivered room batch with
	// the interval during which this job held the room's broadcast lock.
	OnBroadcast func(room string, locked, unlocked time.Time, msgs []danmaku.Message)
}

// Job consumes the room topic and delivers each room's messages to the
// comets that hold its viewers: a consumer (fetch, commit), a scheduler
// (room buffers and windows, offsets), Workers deliverers (guards and
// pushes) and a comet directory (leases, quarantine, janitor). See the
// package documentation.
type Job struct {
	cfg       Config
	log       *zap.Logger
	owner     string
	consumer  *consumer
	comets    *cometDirectory
	deliverer *deliverer
	store     Store
	sched     *scheduler
	work      chan *delivery
	results   chan outcome

	mu      sync.Mutex // guards started and stopped
	started bool
	stopped bool // Shutdown was called

	stop      chan struct{} // closed by Shutdown: drain and stop
	hurry     chan struct{} // closed when Shutdown's ctx ends: give up the drain
	hurryOnce sync.Once
	crashed   chan struct{} // closed by crash
	crashOnce sync.Once
	done      chan struct{} // closed when every goroutine has returned
	err       error         // from leaving the group; read after done

	workCtx  context.Context // deliveries; ends with a crash or hurry
	stopWork context.CancelFunc
}

// New builds a Job for cfg and deps.Kafka, which the caller has validated
// (the binaries do it once, with section-prefixed errors, before building any
// role); Start runs it. It does no I/O.
func New(cfg Config, deps Deps) (*Job, error) {
	if len(deps.Kafka.Brokers) == 0 {
		return nil, &config.FieldError{Field: "kafka.brokers", Message: "must not be empty"}
	}
	if deps.Store == nil || deps.Pusher == nil {
		return nil, errors.New("job: Store and Pusher are required")
	}
	log := deps.Log
	if log == nil {
		log = zap.NewNop()
	}
	reg := deps.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	owner := cfg.Owner
	if owner == "" {
		var b [6]byte
		rand.Read(b[:])
		owner = "job-" + hex.EncodeToString(b[:])
	}
	if err := danmaku.CheckID("job.owner", owner); err != nil {
		return nil, err
	}
	j := &Job{cfg: cfg, log: log, owner: owner,
		work:    make(chan *delivery, cfg.Workers),
		results: make(chan outcome, cfg.Workers),
		stop:    make(chan struct{}), hurry: make(chan struct{}),
		crashed: make(chan struct{}), done: make(chan struct{}),
	}
	j.workCtx, j.stopWork = context.WithCancel(context.Background())
	m := newMetrics(reg, func() float64 { return j.consumer.lag() })
	j.consumer = newConsumer(cfg, deps.Kafka, log, m)
	j.comets = newCometDirectory(cfg, deps.Store, log)
	j.store = deps.Store
	j.deliverer = &deliverer{cfg: cfg, owner: owner, store: deps.Store, comets: j.comets,
		pusher: deps.Pusher, m: m, log: log, hook: deps.OnBroadcast,
		release:   newReleaser(cfg, owner, deps.Store, m, log),
		positions: newPositions(cfg, deps.Kafka, reg),
		canary:    newCanaryAges(reg, j.consumer.assigned), vouch: j.consumer.vouch}
	j.sched = &scheduler{cfg: cfg, m: m, in: j.consumer.out, work: j.work, results: j.results,
		commit: j.consumer.queue, generation: j.consumer.seq.Load, crashed: j.crashed, rooms: map[string]*roomState{}, heads: map[string]knownHead{},
		offsets: newOffsets(), heldList: newHeldLister(cfg, deps.Store, log)}
	return j, nil
}

// Owner returns the id this job uses in dedup claims.
func (j *Job) Owner() string { return j.owner }

// Start reads the live comets (bounded by ctx), starts the group member and
// the job's goroutines, and returns: the member joins the consumer group in
// the background and consumption begins once partitions are assigned. The
// job runs until Shutdown.
func (j *Job) Start(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.started:
		return errors.New("job: already started")
	case j.stopped:
		return errors.New("job: shut down")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("job: start: %w", err)
	}
	if err := j.consumer.open(); err != nil {
		return err
	}
	j.comets.refresh(ctx)
	if err := j.deliverer.positions.ensure(ctx); err != nil {
		j.log.Warn("positions topic not ready; tried again after a failed write", zap.String("topic", j.cfg.PositionsTopic), zap.Error(err))
	}
	j.started = true
	go j.run()
	return nil
}

// run is the job's life from Start until every goroutine it started has
// returned.
func (j *Job) run() {
	defer close(j.done)
	fetchCtx, stopFetch := context.WithCancel(context.Background())
	defer stopFetch()
	var loops, workers sync.WaitGroup
	loops.Add(5)
	go func() { defer loops.Done(); j.consumer.fetch(fetchCtx) }()
	go func() { defer loops.Done(); j.comets.run(fetchCtx) }()
	go func() { defer loops.Done(); j.deliverer.release.run(fetchCtx) }()
	go func() { defer loops.Done(); j.consumer.commitLoop() }()
	go func() { defer loops.Done(); j.sched.heldList.run(fetchCtx) }()
	for range j.cfg.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for d := range j.work {
				j.results <- j.deliverer.deliver(j.workCtx, d)
			}
		}()
	}

	j.sched.run(j.stop, j.hurry) // returns with nothing in flight
	stopFetch()
	close(j.work)
	workers.Wait()
	j.stopWork()
	j.consumer.finishCommits() // the commit loop sends what is queued and returns
	loops.Wait()
	j.err = errors.Join(j.consumer.close(), j.deliverer.positions.close())
}

// Ready reports whether the job can deliver: Redis answers (every
// delivery passes its guards there). cmd/job serves it as /readyz.
func (j *Job) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, j.cfg.RedisTimeout)
	defer cancel()
	return j.store.Ping(ctx)
}

// Shutdown stops the job gracefully: it stops fetching, delivers what is
// buffered (bounded by DrainTimeout), commits, and leaves the consumer
// group. When ctx ends first it gives up the drain: deliveries in flight are
// cancelled, what was finished is still committed, and it returns ctx's
// error while the rest completes in the background (Done closes then). Safe
// to call more than once and before Start.
func (j *Job) Shutdown(ctx context.Context) error {
	j.mu.Lock()
	if !j.stopped {
		j.stopped = true
		close(j.stop)
		if !j.started {
			close(j.done)
		}
	}
	j.mu.Unlock()
	select {
	case <-j.done:
		return j.err
	case <-ctx.Done():
		j.hurryOnce.Do(func() {
			close(j.hurry)
			j.stopWork()
		})
		return fmt.Errorf("job: shutdown: %w", ctx.Err())
	}
}

// Done is closed once the job has stopped and every goroutine it started
// has returned: after Shutdown (or a crash in tests). Kafka and Redis
// failures never stop it (they are retried), so a job stops by itself only
// through a crash.
func (j *Job) Done() <-chan struct{} { return j.done }

// crash stops the job as a crash would: nothing more is delivered or
// committed, and what was consumed and not committed is redelivered to the
// next member of the group. The member still leaves the group, so the next
// member gets the partitions without waiting for the session timeout.
func (j *Job) crash() {
	j.crashOnce.Do(func() {
		j.consumer.abandoned.Store(true)
		close(j.crashed)
		j.stopWork()
	})
}
