package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/kafkax"
)

// partition is one assigned partition of a generation: where its fetching
// stands. next is owned by the one fetch loop that fetches the partition.
type partition struct {
	id   int32
	gen  int64        // the member's generation (consumer.seq)
	next int64        // next offset to fetch; kafka.FirstOffset until resolved
	sent int64        // next offset not yet handed to the scheduler
	hw   int64        // high watermark, as of the last response
	lag  atomic.Int64 // hw - sent
}

// Limits of one fetch request. The partition limit keeps one partition's
// backlog from filling a response that all of them share; the order of
// the partitions in the request rotates, so none is always last.
const (
	fetchMaxBytes     = 8 << 20
	fetchPartMaxBytes = 1 << 20
	// lingerMinBytes is the fill a lingering fetch waits for (see
	// Config.FetchLinger): above a rate where linger is moot.
	lingerMinBytes = 256 << 10
)

// fetchPartitions fetches parts until ctx ends or a request fails. It
// resolves positions the group left unset, groups the partitions by leader
// and runs one fetch loop per leader (one request in flight per leader
// broker, covering all of the member's partitions it leads). The error
// says why it stopped: the caller backs off and calls it again, with the
// positions the loops reached.
func (c *consumer) fetchPartitions(ctx context.Context, parts []*partition) error {
	if err := c.resolveOffsets(ctx, parts); err != nil {
		return err
	}
	leaders, err := kafkax.Leaders(ctx, c.client.Transport, c.client.Addr, c.kcfg.Topic)
	if err != nil {
		return err
	}
	byLeader := map[int32][]*partition{}
	for _, p := range parts {
		if int(p.id) >= len(leaders) || leaders[p.id] < 0 {
			return fmt.Errorf("partition %d has no leader", p.id)
		}
		byLeader[leaders[p.id]] = append(byLeader[leaders[p.id]], p)
	}
	if len(byLeader) == 1 {
		return c.fetchLoop(ctx, parts)
	}
	// A loop that fails stops the others: the partitions are grouped anew.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, ps := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cancel(c.fetchLoop(ctx, ps))
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// resolveOffsets turns the start offset the group gives a partition without
// a committed position (kafka.FirstOffset) into an offset.
func (c *consumer) resolveOffsets(ctx context.Context, parts []*partition) error {
	var req []kafka.OffsetRequest
	for _, p := range parts {
		if p.next < 0 {
			req = append(req, kafka.FirstOffsetOf(int(p.id)))
		}
	}
	if len(req) == 0 {
		return nil
	}
	res, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{c.kcfg.Topic: req}})
	if err != nil {
		return fmt.Errorf("list offsets: %w", err)
	}
	first := map[int32]int64{}
	for _, po := range res.Topics[c.kcfg.Topic] {
		if po.Error != nil {
			return fmt.Errorf("list offsets of partition %d: %w", po.Partition, po.Error)
		}
		first[int32(po.Partition)] = po.FirstOffset
	}
	for _, p := range parts {
		if p.next < 0 {
			off, ok := first[p.id]
			if !ok {
				return fmt.Errorf("list offsets: no answer for partition %d", p.id)
			}
			p.next = off
			c.logStarts(int(p.id), off)
		}
	}
	for _, p := range parts {
		p.sent = p.next
	}
	return nil
}

// logStarts notes that partition p, which the group had no position for,
// starts at off: committing off moves it nowhere (vouch).
func (c *consumer) logStarts(p int, off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held, ok := c.held[p]; ok && held < 0 {
		c.held[p] = off
	}
}

// fetchLoop sends fetch requests for parts, all led by one broker, and
// hands each response's records to the scheduler as one slice, until ctx
// ends or a request fails. A request waits up to MaxWait for a first
// record; after a response that carried several records, it waits up to
// FetchLinger for more to gather, so that a busy topic is read in a few
// full responses rather than one per record.
func (c *consumer) fetchLoop(ctx context.Context, parts []*partition) error {
	req := &fetch.Request{ReplicaID: -1, MaxBytes: fetchMaxBytes, SessionID: -1, SessionEpoch: -1,
		Topics: []fetch.RequestTopic{{Topic: c.kcfg.Topic, Partitions: make([]fetch.RequestPartition, len(parts))}}}
	byID := make(map[int32]*partition, len(parts))
	for _, p := range parts {
		byID[p.id] = p
	}
	var buf []byte
	busy := false
	for turn := 0; ; turn++ {
		for i := range parts {
			p := parts[(turn+i)%len(parts)]
			req.Topics[0].Partitions[i] = fetch.RequestPartition{Partition: p.id, CurrentLeaderEpoch: -1,
				FetchOffset: p.next, LogStartOffset: -1, PartitionMaxBytes: fetchPartMaxBytes}
		}
		wait := c.cfg.MaxWait
		req.MinBytes = 1
		if busy && c.cfg.FetchLinger > 0 {
			wait, req.MinBytes = c.cfg.FetchLinger, lingerMinBytes
		}
		req.MaxWaitTime = int32(max(wait.Milliseconds(), 1))
		rctx, cancel := context.WithTimeout(ctx, wait+c.cfg.SessionTimeout)
		res, err := c.transport.RoundTrip(rctx, c.client.Addr, req)
		cancel()
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		c.m.fetches.Inc()
		var batch []record
		batch, buf, err = c.decode(res.(*fetch.Response), byID, buf)
		c.updateLag(parts)
		if len(batch) > 0 {
			select {
			case c.out <- batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			for _, p := range parts {
				p.sent = p.next
			}
			c.updateLag(parts)
		}
		if err != nil {
			return err
		}
		// One record at a time is a quiet topic: lingering would only
		// add an empty response per record.
		busy = len(batch) > 1
	}
}

// updateLag publishes how far behind the high watermark what was handed
// to the scheduler is.
func (c *consumer) updateLag(parts []*partition) {
	for _, p := range parts {
		p.lag.Store(max(p.hw-p.sent, 0))
	}
}

// decode turns a fetch response into records, in offset order within each
// partition, and moves the partitions' positions past them. buf is reused
// for record values (decoding copies what it keeps). A partition error
// ends the loop after the records decoded so far are handed over; a
// position out of range starts the partition over from its first offset.
func (c *consumer) decode(res *fetch.Response, byID map[int32]*partition, buf []byte) ([]record, []byte, error) {
	if res.ErrorCode != 0 {
		return nil, buf, fmt.Errorf("fetch: %w", kafka.Error(res.ErrorCode))
	}
	var batch []record
	var failed error
	for _, t := range res.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			p := byID[rp.Partition]
			if p == nil {
				continue
			}
			if rp.ErrorCode != 0 {
				err := kafka.Error(rp.ErrorCode)
				if errors.Is(err, kafka.OffsetOutOfRange) {
					p.next = kafka.FirstOffset
				}
				failed = errors.Join(failed, fmt.Errorf("fetch partition %d: %w", p.id, err))
				continue
			}
			var err error
			batch, buf, err = c.decodeRecords(rp.RecordSet.Records, p, batch, buf)
			if err != nil {
				failed = errors.Join(failed, fmt.Errorf("fetch partition %d: %w", p.id, err))
			}
			p.hw = rp.HighWatermark
		}
	}
	return batch, buf, failed
}

// decodeRecords appends the records of rs at or past p's position to
// batch.
func (c *consumer) decodeRecords(rs protocol.RecordReader, p *partition, batch []record, buf []byte) ([]record, []byte, error) {
	if rs == nil {
		return batch, buf, nil
	}
	for {
		r, err := rs.ReadRecord()
		if errors.Is(err, io.EOF) {
			return batch, buf, nil
		}
		if err != nil {
			return batch, buf, err
		}
		if r.Key != nil {
			r.Key.Close()
		}
		if r.Offset < p.next || r.Value == nil {
			// A batch may start before the position asked for; a record
			// without a value is not an envelope.
			if r.Value != nil {
				r.Value.Close()
			} else if r.Offset >= p.next {
				batch = append(batch, record{err: errNoValue, part: int(p.id), off: r.Offset, gen: p.gen})
				p.next = r.Offset + 1
			}
			continue
		}
		n := r.Value.Len()
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		_, err = io.ReadFull(r.Value, buf[:n])
		r.Value.Close()
		if err != nil {
			return batch, buf, err
		}
		env, derr := danmaku.UnmarshalEnvelope(buf[:n])
		batch = append(batch, record{env: env, err: derr, part: int(p.id), off: r.Offset, gen: p.gen})
		p.next = r.Offset + 1
	}
}

var errNoValue = danmaku.Errorf(danmaku.EINVALID, "envelope", "record without a value")
