package kafkax

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/produce"
)

// flight is one produce request: the records of queued writes for
// partitions led by one broker. kafka-go's Transport sends a produce
// request whole to the one broker that leads all its partitions (it does
// not split it by leader), so a request never mixes leaders. A flight is
// reused once its request was answered; after a failed round trip the
// transport may still be encoding it, so it is dropped instead.
type flight struct {
	leader      int32
	msgs, bytes int
	parts       []*part // partitions in the request, in first-seen order
	spare       []*part
	slot        []int32 // partition id -> index in parts + 1; 0: not in it

	req      produce.Request
	topic    [1]produce.RequestTopic
	reqParts []produce.RequestPartition
}

// part is one partition's record batch in a flight.
type part struct {
	id   int32
	recs records
}

// records reads the records of a partition's writes for the encoder
// without allocating: one Record and two byte readers, reset per record.
type records struct {
	pend []*pending
	i, j int // next write and record in it
	rec  protocol.Record
	key  byteReader
	val  byteReader
}

type byteReader struct{ bytes.Reader }

func (*byteReader) Close() error { return nil }

func (r *records) ReadRecord() (*protocol.Record, error) {
	for r.i < len(r.pend) {
		pd := r.pend[r.i]
		if r.j < len(pd.values) {
			r.key.Reset(pd.key)
			r.val.Reset(pd.values[r.j])
			r.j++
			r.rec = protocol.Record{Time: pd.t, Key: &r.key, Value: &r.val}
			return &r.rec, nil
		}
		r.i, r.j = r.i+1, 0
	}
	return nil, io.EOF
}

// add puts pd's records into partition id's batch.
func (f *flight) add(pd *pending, id int, leader int32) {
	if id >= len(f.slot) {
		f.slot = append(f.slot, make([]int32, id+1-len(f.slot))...)
	}
	k := f.slot[id]
	if k == 0 {
		var pt *part
		if n := len(f.spare); n > 0 {
			pt, f.spare = f.spare[n-1], f.spare[:n-1]
		} else {
			pt = &part{}
		}
		pt.id = int32(id)
		f.parts = append(f.parts, pt)
		k = int32(len(f.parts))
		f.slot[id] = k
	}
	pt := f.parts[k-1]
	pt.recs.pend = append(pt.recs.pend, pd)
	f.leader = leader
	f.msgs += len(pd.values)
	f.bytes += pd.bytes
}

// build fills the produce request from the batches.
func (f *flight) build(topic string, timeout time.Duration) {
	f.reqParts = f.reqParts[:0]
	for _, pt := range f.parts {
		pt.recs.i, pt.recs.j = 0, 0
		f.reqParts = append(f.reqParts, produce.RequestPartition{
			Partition: pt.id,
			RecordSet: protocol.RecordSet{Records: &pt.recs},
		})
	}
	f.topic[0] = produce.RequestTopic{Topic: topic, Partitions: f.reqParts}
	f.req = produce.Request{
		Acks:    int16(kafka.RequireAll),
		Timeout: int32(timeout.Milliseconds()),
		Topics:  f.topic[:],
	}
}

// reset empties the flight for the next request.
func (f *flight) reset() {
	for _, pt := range f.parts {
		f.slot[pt.id] = 0
		clear(pt.recs.pend)
		pt.recs.pend = pt.recs.pend[:0]
		pt.recs.rec = protocol.Record{}
		f.spare = append(f.spare, pt)
	}
	clear(f.parts)
	f.parts = f.parts[:0]
	clear(f.reqParts)
	f.msgs, f.bytes = 0, 0
}

// takeLocked moves queued writes into the empty flight f: in queue order,
// each write whose partition is known, not in another request, not
// backing off and led by the same broker as the first one taken (one with
// fewer than MaxInFlight requests out), until
// MaxMessages or MaxBytes would be exceeded (the first write is taken
// whatever its size). Writes whose callers left are dropped. A write that
// is passed over holds back every later write of its partition, so each
// partition keeps queue order. next is when a write held back by a
// backoff (or by the missing metadata) may go; other reports a write held
// back only because another leader, free to take a request, leads its
// partition.
func (p *Producer) takeLocked(f *flight, now time.Time) (next time.Time, other bool) {
	keep := p.queue[:0]
	full := false
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, pd := range p.queue {
		if pd.gone {
			continue
		}
		if full || p.parts == 0 {
			keep = append(keep, pd)
			continue
		}
		id := partitionOf(pd.sum, p.parts)
		if p.busy[id] {
			keep = append(keep, pd)
			continue
		}
		if t := p.retryAt[id]; now.Before(t) {
			soonest(t)
			keep = append(keep, pd)
			continue
		}
		leader := p.leaders[id]
		if leader < 0 {
			// No leader now (an election): wait for new metadata.
			p.metaStale = true
			p.retryAt[id] = now.Add(p.cfg.BackoffMin)
			pd.lastErr = fmt.Errorf("partition %d: %w", id, kafka.LeaderNotAvailable)
			soonest(p.retryAt[id])
			keep = append(keep, pd)
			continue
		}
		if p.toLeader[leader] >= p.cfg.MaxInFlight {
			keep = append(keep, pd)
			continue
		}
		if f.msgs > 0 && leader != f.leader {
			other = true
			keep = append(keep, pd)
			continue
		}
		if f.msgs > 0 && (f.msgs+len(pd.values) > p.cfg.MaxMessages || f.bytes+pd.bytes > p.cfg.MaxBytes) {
			full = true
			keep = append(keep, pd)
			continue
		}
		f.add(pd, id, leader)
	}
	clear(p.queue[len(keep):])
	p.queue = keep
	for _, pt := range f.parts {
		p.busy[pt.id] = true
	}
	if f.msgs > 0 {
		p.toLeader[f.leader]++
	}
	if p.parts == 0 && len(p.queue) > 0 {
		for _, pd := range p.queue {
			pd.lastErr = p.metaErr
		}
		t := now.Add(p.cfg.BackoffMin)
		if p.metaRetry.After(t) {
			t = p.metaRetry
		}
		soonest(t)
	}
	return next, other
}

// send makes f's request and answers its writers. It reports whether f
// may be reused.
func (p *Producer) send(f *flight) bool {
	f.build(p.topic, p.cfg.WriteTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.WriteTimeout)
	r, err := p.tr.RoundTrip(ctx, p.addr, &f.req)
	cancel()
	var resp *produce.Response
	if err == nil {
		if resp, _ = r.(*produce.Response); resp == nil {
			err = fmt.Errorf("produce answered with %T", r)
		}
	}
	p.finish(f, resp, err)
	if err != nil {
		return false
	}
	f.reset()
	return true
}

// finish answers the writers of f by the outcome of each partition: nil
// when written; for a retriable failure the writes go back to the front of
// the queue (in order) after the partition's backoff; other failures are
// their writers' errors. reqErr is a failure of the whole request.
func (p *Producer) finish(f *flight, resp *produce.Response, reqErr error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.toLeader[f.leader]--; p.toLeader[f.leader] <= 0 {
		delete(p.toLeader, f.leader)
	}
	var again []*pending
	for i, pt := range f.parts {
		id := pt.id
		err := reqErr
		if err == nil {
			err = partitionError(resp, p.topic, i, id)
		}
		p.busy[id] = false
		switch {
		case err == nil:
			p.fails[id] = 0
			for _, pd := range pt.recs.pend {
				pd.done <- nil
			}
		case retriable(err):
			p.fails[id] = min(p.fails[id]+1, 16)
			p.retryAt[id] = now.Add(p.backoff(p.fails[id]))
			p.metaStale = true
			for _, pd := range pt.recs.pend {
				pd.tainted = pd.tainted || reqErr != nil
				switch {
				case pd.gone:
				case p.aborted:
					pd.done <- ErrClosed
				default:
					pd.lastErr = err
					again = append(again, pd)
				}
			}
		default:
			werr := fmt.Errorf("kafka produce to %s partition %d: %w", p.topic, id, err)
			for _, pd := range pt.recs.pend {
				pd.tainted = pd.tainted || reqErr != nil
				pd.done <- werr
			}
		}
	}
	if len(again) > 0 {
		p.queue = append(again, p.queue...)
	}
}

// backoff is the wait after n failures in a row.
func (p *Producer) backoff(n uint8) time.Duration {
	d := p.cfg.BackoffMin << (n - 1)
	if d <= 0 || d > p.cfg.BackoffMax {
		return p.cfg.BackoffMax
	}
	return d
}

var errNoAnswer = errors.New("no answer for the partition")

// partitionError is the outcome of partition id, the i-th of the request,
// in resp.
func partitionError(resp *produce.Response, topic string, i int, id int32) error {
	for _, t := range resp.Topics {
		if t.Topic != topic {
			continue
		}
		if i < len(t.Partitions) && t.Partitions[i].Partition == id {
			return codeError(&t.Partitions[i])
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == id {
				return codeError(&t.Partitions[j])
			}
		}
	}
	return errNoAnswer
}

func codeError(rp *produce.ResponsePartition) error {
	switch {
	case rp.ErrorCode == 0:
		return nil
	case rp.ErrorMessage != "":
		return fmt.Errorf("%w: %s", kafka.Error(rp.ErrorCode), rp.ErrorMessage)
	}
	return kafka.Error(rp.ErrorCode)
}

// retriable reports whether a failed write may succeed when tried again:
// the broker's temporary errors, and every failure that is not a broker's
// answer (a lost connection, a timeout, routing on stale metadata).
func retriable(err error) bool {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	return true
}
