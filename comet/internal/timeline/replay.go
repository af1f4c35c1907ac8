package timeline

import "github.com/danmaku/danmaku"

// ReplayBlock is the span of positions one shared replay frame covers.
// A resume's replay is the positions after since up to the next multiple
// of ReplayBlock (encoded for that viewer), then whole blocks and the
// last partial one, each encoded once per room and shared by every viewer
// resuming through it: a crowd resuming at once costs one encoding of the
// range, not one per viewer.
const ReplayBlock = 256

// Encoder makes the frame F replaying msgs (never empty); shared says the
// frame is kept and sent to many viewers, so it is worth encoding now.
// ok false: no frame (the encoding failed).
type Encoder[F any] func(msgs []danmaku.Message, shared bool) (f F, ok bool)

// Blocks caches a room's shared replay frames, of type F, between
// resumes. It is guarded by the room's lock, as the timeline is. A
// block's messages never change once its positions are at or below the
// timeline's Last and above its From, so a block stays valid until it
// falls out of the ring, or the timeline changes (Gen: a new epoch,
// messages removed).
type Blocks[F any] struct {
	gen    uint64
	whole  map[int64]block[F] // by the block's last position
	tail   block[F]           // the partial block after the last whole one
	tailAt span               // its range
}

type block[F any] struct {
	f  F
	ok bool
}

// span is the range of positions (from, to].
type span struct{ from, to int64 }

// current empties c when the timeline changed since it was filled.
func (c *Blocks[F]) current(gen uint64) {
	if c.gen != gen {
		*c = Blocks[F]{gen: gen}
	}
}

// Replay appends to out the frames replaying t's ring after position
// since (which the ring covers): the head up to the next multiple of
// ReplayBlock encoded for this viewer, then the whole blocks and the
// partial tail from c, encoding those missing. Blocks that left the ring
// are dropped from c.
func (c *Blocks[F]) Replay(t *Timeline, since int64, enc Encoder[F], out []F) []F {
	c.current(t.Gen)
	last, p := t.Last, since
	if end := min(last, (p/ReplayBlock+1)*ReplayBlock); p < end {
		if f, ok := encode(t, span{p, end}, enc, false); ok {
			out = append(out, f)
		}
		p = end
	}
	if c.whole == nil {
		c.whole = map[int64]block[F]{}
	}
	for ; p+ReplayBlock <= last; p += ReplayBlock {
		b, hit := c.whole[p+ReplayBlock]
		if !hit {
			b.f, b.ok = encode(t, span{p, p + ReplayBlock}, enc, true)
			c.whole[p+ReplayBlock] = b
		}
		if b.ok {
			out = append(out, b.f)
		}
	}
	if p < last {
		if c.tailAt != (span{p, last}) || !c.tail.ok {
			c.tail.f, c.tail.ok = encode(t, span{p, last}, enc, true)
			c.tailAt = span{p, last}
		}
		if c.tail.ok {
			out = append(out, c.tail.f)
		}
	}
	for end := range c.whole {
		if end-ReplayBlock < t.From {
			delete(c.whole, end)
		}
	}
	return out
}

// encode encodes the ring's messages in s, none when s holds no message.
func encode[F any](t *Timeline, s span, enc Encoder[F], shared bool) (F, bool) {
	msgs := t.Slice(s.from, s.to)
	if len(msgs) == 0 {
		var zero F
		return zero, false
	}
	return enc(msgs, shared)
}
