package kafkax

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// ErrClosed is returned by Write once Close was called.
var ErrClosed = errors.New("kafka producer closed")

// ProducerConfig tunes a Producer. Zero values take the defaults named.
type ProducerConfig struct {
	// Linger is how long a request that starts while nothing is in flight
	// waits for more records. Records that arrive while a request is in
	// flight wait for it anyway, so this only trades a lone write's latency
	// for larger requests at low load. Default 0: send at once, once the
	// writers already runnable (woken together) have queued their records.
	Linger time.Duration
	// MaxMessages is the most records in one produce request (default
	// 1000). A single write with more records still goes out whole.
	MaxMessages int
	// MaxBytes is the most key and value bytes in one produce request
	// (default 1,000,000, under Kafka's default request and batch limits).
	MaxBytes int
	// MaxInFlight is how many produce requests may be in flight to one
	// broker at once (default 1), so a slow broker does not hold up the
	// partitions other brokers lead. A partition is in one request at a
	// time.
	MaxInFlight int
	// WriteTimeout bounds one produce round trip (default 10 s); the
	// broker is given the same time to gather the acknowledgements.
	WriteTimeout time.Duration
	// DialTimeout bounds connecting to a broker (default 5 s).
	DialTimeout time.Duration
	// MetadataTTL is how old the partition count and leaders may grow
	// before they are read again (default 5 s); a failed request has them
	// read again sooner.
	MetadataTTL time.Duration
	// BackoffMin and BackoffMax bound the wait before a partition whose
	// write failed with a retriable error is tried again (defaults 10 ms
	// and 200 ms); the wait doubles with each failure in a row.
	BackoffMin, BackoffMax time.Duration
}

func (c *ProducerConfig) defaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.MaxMessages <= 0 {
		c.MaxMessages = 1000
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 1_000_000
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 1
	}
	c.Linger = max(c.Linger, 0)
	def(&c.WriteTimeout, 10*time.Second)
	def(&c.DialTimeout, 5*time.Second)
	def(&c.MetadataTTL, 5*time.Second)
	def(&c.BackoffMin, 10*time.Millisecond)
	def(&c.BackoffMax, 200*time.Millisecond)
	c.BackoffMax = max(c.BackoffMax, c.BackoffMin)
}

// Producer writes records to one topic for many concurrent callers with
// few produce requests ("group commit"): while a request is in flight, the
// records of new writes queue; when it returns, one request carries every
// queued record for every partition led by one broker, up to MaxMessages
// and MaxBytes. Each write waits until its records are acknowledged by all
// in-sync replicas (acks = all).
//
// The records of one write share a key and go out together, in order, in
// one record batch of the partition the key hashes to, exactly as
// kafka-go's Writer with the kafka.Hash balancer picks it (see Partition),
// so other producers and the consumers agree on where a room's records
// are. Per partition, records are written in the order their writes were
// queued: a partition is in one request at a time, and records whose
// request failed go back to the front of the queue.
//
// A retriable failure (a lost connection, a leader that moved, an
// unknown partition) is retried with a backoff until the caller's context
// ends; the caller then gets the context's error with the last failure. A
// non-retriable failure (a record too large, say) fails the write at once.
// A write whose caller gave up while its records were queued is dropped
// from the queue; one whose records were already sent may still be
// written, so consumers deduplicate by message id anyway.
//
// kafka-go's Transport sends a produce request whole to the broker that
// leads its partitions (it does not split one by leader), so each request
// carries the partitions of one leader, as the metadata the transport
// caches says; a request routed on stale metadata fails as retriable and
// is tried again once the metadata is read again.
//
// The Producer starts one goroutine per request in flight, none while
// idle, and no goroutine per write.
type Producer struct {
	topic string
	addr  net.Addr
	tr    *kafka.Transport
	cfg   ProducerConfig

	mu       sync.Mutex
	queue    []*pending // writes not yet sent, in arrival order
	inFlight int        // senders running (each has at most one request out)
	starting int        // senders started that have not taken records yet
	closed   bool
	aborted  bool          // Close gave up waiting: queued writes fail
	drained  chan struct{} // closed once closed and nothing queued or in flight
	isDrain  bool
	flights  []*flight // reusable requests
	timer    *time.Timer
	timerAt  time.Time // when timer fires; zero: not armed

	// The topic's layout, read from the transport's metadata.
	parts     int           // partition count; 0: not known yet
	leaders   []int32       // leader broker per partition
	brokers   int           // distinct leaders
	toLeader  map[int32]int // requests in flight per leader
	metaAt    time.Time     // when parts and leaders were read
	metaStale bool          // a failure asked for a fresh read
	metaBusy  bool          // a sender is reading it
	metaRetry time.Time     // no read before this after a failed one
	metaErr   error         // why the last read failed

	// Per partition (indexed by id, grown with parts).
	busy    []bool      // in a request in flight
	retryAt []time.Time // backing off until
	fails   []uint8     // retriable failures in a row
}

// pending is one write: its records and where its answer goes.
type pending struct {
	key    []byte
	values [][]byte
	t      time.Time
	sum    uint32 // FNV-1a of key
	bytes  int
	done   chan error // buffered; gets exactly one answer

	// Guarded by Producer.mu.
	gone    bool  // the caller stopped waiting
	lastErr error // the last retriable failure
	tainted bool  // a failed request may still read it: not reused
}

var pendings = sync.Pool{New: func() any { return &pending{done: make(chan error, 1)} }}

// NewProducer returns a Producer for topic on the cluster reachable
// through brokers. It connects on first use.
func NewProducer(brokers []string, topic string, c ProducerConfig) *Producer {
	c.defaults()
	return &Producer{
		topic:    topic,
		addr:     kafka.TCP(brokers...),
		tr:       &kafka.Transport{DialTimeout: c.DialTimeout, MetadataTTL: c.MetadataTTL, MetadataTopics: []string{topic}},
		cfg:      c,
		drained:  make(chan struct{}),
		toLeader: map[int32]int{},
	}
}

// Partition is the partition of n that records with key go to: FNV-1a of
// the key as a signed 32-bit number modulo n, sign dropped, which is what
// kafka-go's kafka.Hash balancer (and Sarama's default partitioner)
// computes. A producer that writes room records must agree with it.
func Partition(key []byte, n int) int { return partitionOf(fnv1a(key), n) }

func partitionOf(sum uint32, n int) int {
	p := int32(sum) % int32(n)
	if p < 0 {
		p = -p
	}
	return int(p)
}

func fnv1a(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}

// recordOverhead approximates the bytes a record adds to a batch beyond
// its key and value, for MaxBytes.
const recordOverhead = 24

// Write sends values as records with key and time t and returns nil once
// the cluster acknowledged all of them, or an error: ctx's (wrapping the
// last retriable failure) when it ends first, the broker's for a
// non-retriable failure, ErrClosed after Close. The records travel in one
// batch, in order. key and values must not change until Write returns and
// not be reused after it returned an error: a request in flight may still
// read them.
func (p *Producer) Write(ctx context.Context, key []byte, t time.Time, values ...[]byte) error {
	if len(values) == 0 {
		return nil
	}
	pd := pendings.Get().(*pending)
	pd.key, pd.values, pd.t, pd.sum = key, values, t, fnv1a(key)
	pd.bytes = 0
	for _, v := range values {
		pd.bytes += len(key) + len(v) + recordOverhead
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pd.key, pd.values = nil, nil
		pendings.Put(pd)
		return ErrClosed
	}
	p.queue = append(p.queue, pd)
	p.startLocked(pd)
	p.mu.Unlock()

	select {
	case err := <-pd.done:
		p.release(pd)
		return err
	case <-ctx.Done():
	}
	p.mu.Lock()
	select {
	case err := <-pd.done: // answered meanwhile
		p.mu.Unlock()
		p.release(pd)
		return err
	default:
	}
	pd.gone = true
	last := pd.lastErr
	p.mu.Unlock()
	if last != nil {
		return fmt.Errorf("kafka produce: %w (last failure: %w)", ctx.Err(), last)
	}
	return fmt.Errorf("kafka produce: %w", ctx.Err())
}

// release returns an answered pending to the pool unless a failed request
// may still read it. Every change to pd happened before its answer was
// sent, so no lock is needed.
func (p *Producer) release(pd *pending) {
	if pd.tainted {
		return
	}
	*pd = pending{done: pd.done}
	pendings.Put(pd)
}

// startLocked starts a sender for the new write pd when one may run and
// pd can go out now: no sender is running (and no timer will start one),
// or pd's partition is free and fewer than MaxInFlight requests are out.
// A sender that starts from idle lingers first.
func (p *Producer) startLocked(pd *pending) {
	if p.starting > 0 || p.inFlight >= p.maxSendersLocked() {
		return
	}
	idle := p.inFlight == 0
	if !(idle && p.timerAt.IsZero()) && !p.sendableLocked(pd) {
		return
	}
	linger := time.Duration(0)
	if idle {
		linger = p.cfg.Linger
	}
	p.inFlight++
	p.starting++
	go p.run(linger)
}

// maxSendersLocked is the most senders worth running: MaxInFlight per
// broker that leads a partition.
func (p *Producer) maxSendersLocked() int { return p.cfg.MaxInFlight * max(p.brokers, 1) }

// sendableLocked reports whether pd's partition is known, free, not
// backing off and its leader can take another request.
func (p *Producer) sendableLocked(pd *pending) bool {
	if p.parts == 0 {
		return false
	}
	id := partitionOf(pd.sum, p.parts)
	if p.busy[id] || p.toLeader[p.leaders[id]] >= p.cfg.MaxInFlight {
		return false
	}
	t := p.retryAt[id]
	return t.IsZero() || !time.Now().Before(t)
}

// run is one sender: it takes queued records, sends them in one request,
// answers their writers, and repeats until nothing can go out now.
func (p *Producer) run(linger time.Duration) {
	if linger > 0 {
		time.Sleep(linger)
	} else {
		// Without a linger, the goroutines that are ready to run go
		// first: writers woken together (the requests of one admission
		// batch, say) are runnable when the first of them starts this
		// sender, and their records join its request instead of waiting
		// a round trip for the next. With nothing else runnable this
		// returns at once.
		runtime.Gosched()
	}
	first := true
	var f *flight
	for {
		p.refreshMetadata()
		p.mu.Lock()
		if first {
			p.starting--
			first = false
		}
		if f == nil {
			f = p.flightLocked()
		}
		next, other := p.takeLocked(f, time.Now())
		if other && p.starting == 0 && p.inFlight < p.maxSendersLocked() {
			// Writes for another leader wait: a sender of their own.
			p.inFlight++
			p.starting++
			go p.run(0)
		}
		if f.msgs == 0 {
			p.inFlight--
			p.flights = append(p.flights, f)
			if !next.IsZero() {
				p.armLocked(next)
			}
			p.checkDrainedLocked()
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if !p.send(f) {
			f = nil // the transport may still hold the request
		}
	}
}

// flightLocked returns a reusable request or a new one.
func (p *Producer) flightLocked() *flight {
	if n := len(p.flights); n > 0 {
		f := p.flights[n-1]
		p.flights = p.flights[:n-1]
		return f
	}
	return &flight{}
}

// armLocked makes the timer start a sender at t, unless it fires sooner.
func (p *Producer) armLocked(t time.Time) {
	if !p.timerAt.IsZero() && !t.Before(p.timerAt) {
		return
	}
	p.timerAt = t
	d := time.Until(t)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.wake)
		return
	}
	p.timer.Reset(d)
}

// wake runs when a backoff ended: it starts a sender for the queue.
func (p *Producer) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timerAt = time.Time{}
	if len(p.queue) == 0 || p.starting > 0 || p.inFlight >= p.maxSendersLocked() {
		return
	}
	p.inFlight++
	p.starting++
	go p.run(0)
}

// checkDrainedLocked signals Close once it asked and nothing is left.
func (p *Producer) checkDrainedLocked() {
	if p.closed && !p.isDrain && p.inFlight == 0 && len(p.queue) == 0 {
		p.isDrain = true
		close(p.drained)
	}
}

// refreshMetadata reads the partition count and leaders again when they
// are unknown, old or known to be wrong, unless another sender does or a
// failed read is backing off. The read is answered from the transport's
// metadata cache, which the transport refreshes every MetadataTTL.
func (p *Producer) refreshMetadata() {
	p.mu.Lock()
	now := time.Now()
	need := !p.metaBusy && (p.parts == 0 || p.metaStale || now.Sub(p.metaAt) >= p.cfg.MetadataTTL) &&
		!now.Before(p.metaRetry)
	if need {
		p.metaBusy = true
	}
	p.mu.Unlock()
	if !need {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout+p.cfg.WriteTimeout)
	leaders, err := Leaders(ctx, p.tr, p.addr, p.topic)
	cancel()

	p.mu.Lock()
	defer p.mu.Unlock()
	p.metaBusy = false
	p.metaRetry = now.Add(p.cfg.BackoffMin)
	if err != nil {
		p.metaErr = err
		return
	}
	p.metaErr, p.metaStale, p.metaAt = nil, false, now
	p.parts, p.leaders = len(leaders), leaders
	distinct := map[int32]bool{}
	for _, l := range leaders {
		distinct[l] = true
	}
	p.brokers = len(distinct)
	if n := len(leaders); n > len(p.busy) {
		p.busy = append(p.busy, make([]bool, n-len(p.busy))...)
		p.retryAt = append(p.retryAt, make([]time.Time, n-len(p.retryAt))...)
		p.fails = append(p.fails, make([]uint8, n-len(p.fails))...)
	}
}

// Close stops taking writes (Write returns ErrClosed), then waits until
// every queued write was answered and no request is in flight, or ctx
// ends: then the writes still queued fail with ErrClosed and ctx's error
// is returned. Safe to call more than once.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.checkDrainedLocked()
	p.mu.Unlock()
	var err error
	select {
	case <-p.drained:
	case <-ctx.Done():
		err = fmt.Errorf("kafka producer close: %w", ctx.Err())
		p.mu.Lock()
		p.aborted = true
		for _, pd := range p.queue {
			pd.done <- ErrClosed
		}
		clear(p.queue)
		p.queue = p.queue[:0]
		p.checkDrainedLocked()
		p.mu.Unlock()
	}
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.tr.CloseIdleConnections()
	return err
}
