package job

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// delivery is the scheduler's request to deliver one room batch.
type delivery struct {
	room  string
	msgs  []pending // oldest first, at most Budget
	drain bool      // shutdown drain: skip the cooldown window
	// urgent: the room holds a high-priority message, in this delivery or
	// behind it; the delivery skips the cooldown window.
	urgent bool
	giveUp bool       // deliver to the comets that take it, count the rest as dropped
	known  route.Head // the room's timeline head as this job last assigned it
	// historySize is how many messages the room's history keeps after
	// this delivery (knownHead.historySize).
	historySize int
}

// outcome is what became of a delivery. Every message of the delivery is in
// exactly one of done and retry, each in the delivery's order.
type outcome struct {
	room   string
	done   []pending     // finished (delivered, duplicate, dropped by policy): offsets may be committed
	retry  []pending     // to deliver again, before what arrived since
	wait   time.Duration // no retry before this
	failed bool          // Redis or every comet failed: the scheduler backs off
	head   route.Head    // the timeline head after this delivery's positions; zero if none were assigned
}

// verdict is what a delivery decided for one message; the zero value
// sends it back to be retried.
type verdict bool

const (
	again    verdict = false
	finished verdict = true
)

// result sorts the messages of req by verdict into an outcome.
func (req *delivery) result(v []verdict, wait time.Duration, failed bool) outcome {
	o := outcome{room: req.room, wait: wait, failed: failed}
	for i, p := range req.msgs {
		if v[i] == finished {
			o.done = append(o.done, p)
		} else {
			o.retry = append(o.retry, p)
		}
	}
	return o
}

// deliverer runs the Redis guards and the pushes of one room batch at a
// time; the job runs Workers deliveries at once. Redis sees two round trips
// per batch around the pushes: BeginBroadcast (lock, window, claims,
// positions, routes), then ReleaseLock.
type deliverer struct {
	cfg    Config
	owner  string
	store  Store
	comets *cometDirectory
	pusher Pusher
	m      *metrics
	log    *zap.Logger
	hook   func(room string, locked, unlocked time.Time, msgs []danmaku.Message)

	// release takes back what a Begin that failed here may have taken.
	release *releaser
	// canary records the canaries pushed (canary.go).
	canary *canaryAges
	// positions publishes the positions of delivered batches (positions.go).
	positions *positions
	// vouch says whether the job still belongs to the consumer group's
	// generation seq, proving it when the last proof is older than maxAge
	// (consumer.vouch); nil vouches for everything.
	vouch func(seq int64, maxAge time.Duration) error
}

// member refuses req (false) when the job cannot show that it still belongs to
// the consumer group generation req's records were fetched in, as of less
// than three quarters of ProcessedTTL ago. A job paused for longer than
// that may have lost its partitions to another job, which delivered these
// messages with claims that have expired since: begun now, the delivery
// would give them new positions and send them to every viewer a second
// time. The quarter left covers the time from here to the claims in Redis.
func (d *deliverer) member(req *delivery) bool {
	if d.vouch == nil {
		return true
	}
	// Every message of a delivery is of the scheduler's generation when it
	// is dispatched (scheduler.newGeneration drops the others).
	err := d.vouch(req.msgs[0].gen, d.cfg.ProcessedTTL*3/4)
	if err != nil {
		d.log.Debug("delivery postponed: membership", zap.String("room", req.room), zap.Error(err))
		d.m.retries.WithLabelValues("membership").Inc()
	}
	return err == nil
}

// deliverOther delivers req when it is not a room batch: an event, a
// lane of notices or a canary.
func (d *deliverer) deliverOther(ctx context.Context, req *delivery) (outcome, bool) {
	switch p := req.msgs[0]; {
	case p.ev != nil:
		return d.deliverEvent(ctx, req, p.ev), true
	case p.notice != nil:
		return d.deliverNotices(ctx, req), true
	case p.canary != nil:
		return d.deliverCanaries(ctx, req), true
	}
	return outcome{}, false
}

// deliver delivers req as far as the guards allow. ctx ends with a crash or
// an abandoned drain; then nothing is delivered and everything is retried.
func (d *deliverer) deliver(ctx context.Context, req *delivery) outcome {
	v := make([]verdict, len(req.msgs))
	if ctx.Err() != nil {
		return req.result(v, 0, false)
	}
	if !d.member(req) { // retried, or dropped once its generation has ended
		return req.result(v, 0, true)
	}
	if o, ok := d.deliverOther(ctx, req); ok {
		return o
	}
	msgs, idx, repeats := distinct(req.msgs)
	b, err := d.begin(ctx, req, msgs, idx)
	if err != nil {
		d.log.Debug("delivery postponed: redis", zap.String("room", req.room), zap.Error(err))
		d.m.retries.WithLabelValues("redis").Inc()
		d.release.add(req.room, b.Lock)
		return req.result(v, 0, true) // the scheduler sets the backoff
	}
	// A message id repeated inside one batch (a client retry that reached
	// Kafka twice in quick succession) is a duplicate without asking Redis.
	markAll(v, repeats, finished)
	d.m.duplicates.Add(float64(len(repeats)))
	switch b.Status {
	case route.InWindow:
		// Another consumer broadcast this room within the window (after a
		// rebalance): wait for the window's end, or skip as the drop policy
		// says.
		if d.cfg.Policy == PolicyDrop {
			d.m.dropped.WithLabelValues("cooldown").Add(float64(len(idx)))
			markAll(v, idx, finished)
			return req.result(v, 0, false)
		}
		return req.result(v, b.Wait, false)
	case route.LockedElsewhere:
		d.m.lockBusy.Inc()
		return req.result(v, d.cfg.LockRetry, false)
	}
	send, wait := d.placeStates(b, idx, v)
	if wait > 0 {
		d.m.retries.WithLabelValues("busy_claim").Inc()
	}
	if b.Status != route.Acquired {
		return req.result(v, wait, false)
	}
	// The positions are in the history now, whatever the pushes do: the
	// room's next batch continues after them.
	ok := d.pushAndEnd(ctx, req, b, send)
	if ok {
		for _, p := range send {
			v[p.i] = finished
		}
	} else {
		d.m.retries.WithLabelValues("push").Inc()
	}
	o := req.result(v, wait, !ok) // after a failure the scheduler sets the backoff
	o.head = b.Head()
	return o
}

// placeStates reads the claim state of each message of b (idx maps them
// to the delivery): the Claimed and Positioned ones are sent at their
// positions, the Processed ones are finished in v, and a Busy one (another
// owner delivers it) makes wait the retry delay.
func (d *deliverer) placeStates(b route.Begin, idx []int, v []verdict) (send []placed, wait time.Duration) {
	for k, st := range b.States {
		switch st {
		case route.Claimed:
			send = append(send, placed{idx[k], b.Pos[k]})
		case route.Positioned:
			// Delivered to Redis before (a redelivery, a retry, a client's
			// second send): it keeps its position, and comets drop it if
			// they already have it.
			d.m.duplicates.Inc()
			send = append(send, placed{idx[k], b.Pos[k]})
		case route.Processed:
			d.m.duplicates.Inc()
			v[idx[k]] = finished
		case route.Busy:
			// Another owner is delivering it: ask again shortly.
			wait = d.cfg.RetryMin
		}
	}
	return send, wait
}

// placed is a message of a delivery (its index in delivery.msgs) and its
// position in the room's timeline.
type placed struct {
	i   int
	pos int64
}

// contiguousTail sorts ps by position and returns its longest suffix of
// consecutive positions. A push carries no hole: a comet repairs what lies
// before a push's first position from the history, but takes a hole inside
// a push as lost. Messages left out (positions given before) are in the
// history, and comets that lack them read them before the push.
func contiguousTail(ps []placed) []placed {
	slices.SortFunc(ps, func(a, b placed) int { return cmp.Compare(a.pos, b.pos) })
	k := len(ps) - 1
	for k > 0 && ps[k-1].pos == ps[k].pos-1 {
		k--
	}
	return ps[max(k, 0):]
}

// begin runs BeginBroadcast for msgs, the distinct messages of req
// (msgs[k] is req.msgs[idx[k]]), with their encoded JSON.
func (d *deliverer) begin(ctx context.Context, req *delivery, msgs []danmaku.Message, idx []int) (route.Begin, error) {
	encoded := make([][]byte, len(idx))
	for k, i := range idx {
		encoded[k] = req.msgs[i].encoded()
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RedisTimeout)
	defer cancel()
	// The Redis window is a little shorter than the scheduler's: the key is
	// set a round trip after the scheduler started its window, and would
	// otherwise still run for those milliseconds when the next batch is due.
	window := d.cfg.Window - min(d.cfg.Window/20, 10*time.Millisecond)
	if req.drain || req.urgent {
		window = 0 // shutdown drain or high priority: deliver now
	}
	return d.store.BeginBroadcast(ctx, req.room, msgs, route.BeginOptions{
		Window: window, Owner: d.owner, ClaimTTL: d.cfg.ProcessedTTL, LockTTL: d.cfg.LockTTL,
		HistorySize: req.historySize, HistoryTTL: d.cfg.HistoryTTL, Known: req.known, Encoded: encoded,
		Replicas: d.cfg.WaitReplicas, ReplicaTimeout: d.cfg.ReplicaTimeout})
}

// pushAndEnd pushes the messages of send (with their positions) to the
// room's comets, as one push of consecutive positions (contiguousTail),
// and ends the broadcast by releasing the lock; the claims are final and
// need no mark. It reports whether the messages count as delivered; if not,
// the retry finds them Positioned and pushes them with the same positions
// (comets drop the positions they already delivered).
func (d *deliverer) pushAndEnd(ctx context.Context, req *delivery, b route.Begin, send []placed) bool {
	tail := contiguousTail(send)
	msgs := make([]danmaku.Message, len(tail))
	encoded := make([][]byte, len(tail))
	pos := make([]int64, len(tail))
	for k, p := range tail {
		msgs[k] = req.msgs[p.i].msg
		msgs[k].Pos = p.pos
		encoded[k], pos[k] = req.msgs[p.i].encoded(), p.pos
	}
	locked := time.Now()
	batch := danmaku.NewBatch(req.room, nil)
	batch.Epoch, batch.Dels, batch.Sv = b.Epoch, b.Dels, b.Sv
	body := danmaku.AppendBatchJSON(nil, batch, encoded, pos)
	ok := d.push(ctx, b.Lock, body, len(msgs), b.Comets, req.giveUp)
	unlocked := time.Now()
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.RedisTimeout)
	defer cancel()
	if err := d.store.ReleaseLock(ectx, b.Lock); err != nil && !errors.Is(err, route.ErrNotHolder) {
		// The lock expires after LockTTL; the room waits until then.
		d.log.Debug("release lock", zap.String("room", req.room), zap.Error(err))
	}
	if !ok || !d.positions.publish(ctx, req.room, b.Epoch, msgs) {
		return false
	}
	d.m.broadcasts.Inc()
	d.m.batchSize.Observe(float64(len(msgs)))
	nowMs := time.Now().UnixMilli()
	for _, msg := range msgs {
		d.m.e2eLag.Observe(float64(nowMs-msg.TS) / 1000)
		if msg.Priority.High() {
			d.m.highLag.Observe(float64(nowMs-msg.TS) / 1000)
		}
	}
	if d.hook != nil {
		d.hook(req.room, locked, unlocked, msgs)
	}
	return true
}

// encoded returns the message's JSON without a position: the envelope's
// bytes, or the message encoded here when the envelope's could not be kept.
func (p pending) encoded() []byte {
	if p.raw != nil {
		return p.raw
	}
	p.msg.Pos = 0
	b, _ := json.Marshal(p.msg) // a Message always encodes
	return b
}

// distinct returns the messages of ps without repeated ids, the index in
// ps of each, and the indexes of the repeats.
func distinct(ps []pending) (msgs []danmaku.Message, idx, repeats []int) {
	msgs = make([]danmaku.Message, 0, len(ps))
	idx = make([]int, 0, len(ps))
	seen := make(map[string]struct{}, len(ps))
	for i, p := range ps {
		if _, dup := seen[p.msg.ID]; dup {
			repeats = append(repeats, i)
			continue
		}
		seen[p.msg.ID] = struct{}{}
		msgs = append(msgs, p.msg)
		idx = append(idx, i)
	}
	return msgs, idx, repeats
}

func markAll(v []verdict, idx []int, to verdict) {
	for _, i := range idx {
		v[i] = to
	}
}
