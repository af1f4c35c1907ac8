package route

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

var (
	admitScript    = script("admit")
	setUntilScript = script("set_until")
)

// admitReq is one Admission with its keys built and checked.
type admitReq struct {
	a                                 Admission
	userKey, ipKey                    string // ipKey "": no address bucket
	muteAll, muteRoom, ban            string
	ctx                               context.Context // the caller's; an Admitter leaves out requests whose ctx ended
	deadline                          time.Time       // an Admitter's answer is due by then
	ui, ii, muteAllI, muteRoomI, banI int             // indices into the batch's keys (1-based)
}

// prepareAdmission checks a and builds its keys.
func prepareAdmission(a Admission) (admitReq, error) {
	r := admitReq{a: a}
	if err := checkIDs("user", a.User, "room", a.Room); err != nil {
		return r, err
	}
	if err := checkBucket(a.N, a.UserBucket.Rate, a.UserBucket.Burst); err != nil {
		return r, err
	}
	if a.IP != "" && a.IPBucket.Rate > 0 {
		if err := checkBucket(a.N, a.IPBucket.Rate, a.IPBucket.Burst); err != nil {
			return r, err
		}
		k, err := ipRateKey(a.IP)
		if err != nil {
			return r, err
		}
		r.ipKey = k
	}
	r.userKey = rateKey(a.User)
	r.muteAll = muteKey(a.User, "")
	r.muteRoom = muteKey(a.User, a.Room)
	r.ban = banKey(a.Room, a.User)
	return r, nil
}

func (s *Store) cluster() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// admitBatch runs admit.lua over reqs, on a single server: one round trip
// and, inside the script, one TIME, one MGET of every key the batch needs
// and one SET per bucket that gave tokens. The verdicts are in the order of
// reqs, and each request sees the buckets as the requests before it left
// them. A bucket's rate and burst are those of its first request.
func (s *Store) admitBatch(ctx context.Context, reqs []*admitReq) ([]Verdict, error) {
	idx := make(map[string]int, 2*len(reqs))
	keys := make([]string, 0, 4*len(reqs))
	args := make([]any, 1, 1+10*len(reqs))
	add := func(k string) int {
		if k == "" {
			return 0
		}
		if i, ok := idx[k]; ok {
			return i
		}
		keys = append(keys, k)
		idx[k] = len(keys)
		return len(keys)
	}
	bucket := func(k string, b Bucket) int {
		n := len(keys)
		i := add(k)
		if i > n {
			args = append(args, b.Rate, b.Burst)
		}
		return i
	}
	for _, r := range reqs {
		r.ui = bucket(r.userKey, r.a.UserBucket)
		r.ii = bucket(r.ipKey, r.a.IPBucket)
	}
	args[0] = len(keys)
	for _, r := range reqs {
		r.muteAllI, r.muteRoomI, r.banI = add(r.muteAll), add(r.muteRoom), add(r.ban)
		args = append(args, r.a.N, r.ui, r.ii, r.muteAllI, r.muteRoomI, r.banI)
	}
	res, err := admitScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, wrap("admit", err)
	}
	if len(res) != 2*len(reqs) {
		return nil, danmaku.Errorf(danmaku.EINTERNAL, "", "admit script returned %d values for %d requests", len(res), len(reqs))
	}
	vs := make([]Verdict, len(reqs))
	for i := range reqs {
		if vs[i], err = verdictOf(res[2*i], res[2*i+1]); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// verdictOf reads one answer of admit.lua: its code and the milliseconds
// the refusal lasts.
func verdictOf(code, ms int64) (Verdict, error) {
	d := time.Duration(ms) * time.Millisecond
	switch code {
	case 1:
		return Verdict{Allowed: true}, nil
	case -2:
		return Verdict{Banned: true, RetryAfter: d}, nil
	case -1:
		return Verdict{Muted: true, RetryAfter: d}, nil
	case -3:
		return Verdict{Muted: true, Everywhere: true, RetryAfter: d}, nil
	case 0:
		return Verdict{Limit: "user", RetryAfter: d}, nil
	case 2:
		return Verdict{Limit: "ip", RetryAfter: d}, nil
	}
	return Verdict{}, danmaku.Errorf(danmaku.EINTERNAL, "", "admit script returned verdict %d", code)
}

// setUntil sets a flag for d (at least 1 ms) with set_until.lua and enters
// it in the sanction lists (x, whose end it sets).
func (s *Store) setUntil(ctx context.Context, key string, x Sanction, d time.Duration) error {
	until, err := setUntilScript.Run(ctx, s.rdb, []string{key}, strconv.FormatInt(d.Milliseconds(), 10)).Int64()
	if err != nil {
		return wrap(x.Kind, err)
	}
	x.Until = until
	return s.index(ctx, x)
}

// AdmitOptions configure an Admitter.
type AdmitOptions struct {
	// Wait is how long a batch stays open for more requests once it could
	// be sent; 0 sends it at once, once the requests already runnable
	// (arrived together) have joined it. Requests that arrive while a batch
	// is in flight gather into the next one whatever Wait is.
	Wait time.Duration
	// Max is the most requests in one batch (default 256).
	Max int
	// InFlight is how many batches may be in flight at once (default 1):
	// with one, a request that arrives during a round trip waits for it
	// to end before its own batch goes; more cut that wait at low load but
	// make batches smaller under high load, and each batch costs the
	// server and Redis a round trip whatever its size.
	InFlight int
	// Timeout bounds the wait of each request (default 1 s): its batch's
	// round trip ends by the earliest deadline of its requests, and a
	// request whose time is up before its batch goes is left out and
	// answered EUNAVAILABLE. A caller gives up at its own context's end in
	// any case.
	Timeout time.Duration
}

// Admitter answers Admit like Store.Admit, but gathers concurrent
// requests into batches (group commit): up to InFlight batches are in
// flight, and what arrives meanwhile goes out as the next batch, in one
// script call (admit.lua) whatever its size. A lone request goes out at
// once (plus Wait). Requests of one user in a batch are checked in arrival order
// against the same bucket, so the answers are those of the same requests
// one after another. On a cluster, where one script cannot reach every
// key, each request runs Store.Admit on its own. Close stops it.
type Admitter struct {
	s       *Store
	o       AdmitOptions
	cluster bool

	mu     sync.Mutex
	open   *admitCall   // gathering
	queue  []*admitCall // full, waiting for their turn
	closed bool

	kick chan struct{} // a batch opened or filled
	stop chan struct{}
	done chan struct{}
}

// admitCall is one batch and its answers.
type admitCall struct {
	reqs     []*admitReq
	verdicts []Verdict
	err      error
	done     chan struct{}
}

// NewAdmitter starts an Admitter over s; Close stops it.
func (s *Store) NewAdmitter(o AdmitOptions) *Admitter {
	if o.Max <= 0 {
		o.Max = 256
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.InFlight <= 0 {
		o.InFlight = 1
	}
	a := &Admitter{s: s, o: o, cluster: s.cluster(),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

// Admit is Store.Admit through the batches. A request is answered within
// Timeout, or at ctx's end when that is sooner; no timer is started per
// request (the batches carry the deadlines). A request whose ctx ends
// before its batch is sent is left out of it.
func (a *Admitter) Admit(ctx context.Context, adm Admission) (Verdict, error) {
	if a.cluster {
		ctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
		defer cancel()
		return a.s.Admit(ctx, adm)
	}
	r, err := prepareAdmission(adm)
	if err != nil {
		return Verdict{}, err
	}
	r.ctx, r.deadline = ctx, time.Now().Add(a.o.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(r.deadline) {
		r.deadline = d
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return Verdict{}, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "admission stopped")
	}
	c := a.open
	if c == nil {
		c = &admitCall{reqs: make([]*admitReq, 0, 16), done: make(chan struct{})}
		a.open = c
	}
	i := len(c.reqs)
	c.reqs = append(c.reqs, &r)
	signal := i == 0
	if len(c.reqs) >= a.o.Max {
		a.queue = append(a.queue, c)
		a.open = nil
		signal = true
	}
	a.mu.Unlock()
	if signal {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
	select {
	case <-c.done:
		if c.err != nil {
			return Verdict{}, c.err
		}
		return c.verdicts[i], nil
	case <-ctx.Done():
		return Verdict{}, wrap("admit", ctx.Err())
	}
}

// Close stops the Admitter once the batch in flight is answered; requests
// still gathering are answered EUNAVAILABLE.
func (a *Admitter) Close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.stop)
	}
	a.mu.Unlock()
	<-a.done
}

func (a *Admitter) loop() {
	var running sync.WaitGroup
	defer func() {
		running.Wait()
		a.fail()
		close(a.done)
	}()
	slots := make(chan struct{}, a.o.InFlight)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-a.kick:
		case <-a.stop:
			return
		}
		for {
			// While every slot is busy, what arrives gathers in the open batch.
			select {
			case slots <- struct{}{}:
			case <-a.stop:
				return
			}
			if a.o.Wait <= 0 {
				// The requests already runnable (arrived together: a burst
				// of connections read in one poll, the senders of one batch
				// answered at once) join this batch instead of following it
				// a round trip later. With nothing else runnable this
				// returns at once, so a lone request is not delayed.
				runtime.Gosched()
			} else if !a.waitFor(timer) {
				<-slots
				return
			}
			c := a.take()
			if c == nil {
				<-slots
				break
			}
			if a.o.InFlight == 1 {
				// The one batch in flight: sent from here, without a
				// goroutine to hand it to.
				a.run(c)
				<-slots
				continue
			}
			running.Add(1)
			go func() {
				defer running.Done()
				a.run(c)
				<-slots
			}()
		}
	}
}

// waitFor holds the open batch for Wait unless a batch is full; false when
// the Admitter stops.
func (a *Admitter) waitFor(timer *time.Timer) bool {
	a.mu.Lock()
	ready := len(a.queue) > 0 || a.open == nil
	a.mu.Unlock()
	if ready {
		return true
	}
	timer.Reset(a.o.Wait)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return true
		case <-a.kick:
			a.mu.Lock()
			full := len(a.queue) > 0
			a.mu.Unlock()
			if full {
				return true
			}
		case <-a.stop:
			return false
		}
	}
}

// take returns the next batch to send: a full one, else the open one.
func (a *Admitter) take() *admitCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) > 0 {
		c := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		return c
	}
	c := a.open
	a.open = nil
	return c
}

// run sends one batch, leaving out requests whose callers gave up or
// whose time is up, and answers every request of it by the earliest
// deadline of those it sends.
func (a *Admitter) run(c *admitCall) {
	defer close(c.done)
	now := time.Now()
	live := c.reqs
	for _, r := range c.reqs {
		if !r.waiting(now) {
			live = nil
			break
		}
	}
	if live == nil { // some callers gave up: send the others only
		for _, r := range c.reqs {
			if r.waiting(now) {
				live = append(live, r)
			}
		}
	}
	if len(live) == 0 {
		c.err = danmaku.Errorf(danmaku.EUNAVAILABLE, "", "admission timed out")
		return
	}
	deadline := live[0].deadline
	for _, r := range live[1:] {
		if r.deadline.Before(deadline) {
			deadline = r.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	vs, err := a.s.admitBatch(ctx, live)
	if err != nil {
		c.err = err
		return
	}
	if len(live) == len(c.reqs) {
		c.verdicts = vs
		return
	}
	c.verdicts = make([]Verdict, len(c.reqs))
	j := 0
	for i, r := range c.reqs {
		if j < len(live) && live[j] == r {
			c.verdicts[i] = vs[j]
			j++
		}
	}
}

// waiting reports whether r's caller still waits for its answer at now.
func (r *admitReq) waiting(now time.Time) bool { return r.ctx.Err() == nil && now.Before(r.deadline) }

// fail answers every batch still waiting with EUNAVAILABLE.
func (a *Admitter) fail() {
	a.mu.Lock()
	calls := append(a.queue, a.open)
	a.queue, a.open = nil, nil
	a.mu.Unlock()
	for _, c := range calls {
		if c != nil {
			c.err = danmaku.Errorf(danmaku.EUNAVAILABLE, "", "admission stopped")
			close(c.done)
		}
	}
}
