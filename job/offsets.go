package job

// offsets tracks, per partition, which consumed offsets are finished
// (delivered, skipped as duplicate, or dropped by policy) and yields the
// offset up to which the partition may be committed: just past the longest
// finished prefix. A message still waiting in a room buffer holds back the
// commit of its partition, so a crash redelivers it.
type offsets struct {
	parts map[int]*partOffsets
}

type partOffsets struct {
	base  int64  // offset of pending[0]
	done  []bool // done[i] is offset base+i
	next  int64  // first offset not yet consumed
	mark  int64  // commit position: every offset below it is finished
	dirty bool   // mark moved since the last commit
	gen   int64  // the member's generation its records were fetched in
}

func newOffsets() *offsets { return &offsets{parts: map[int]*partOffsets{}} }

// consumed records that offset off of partition p was read in the
// member's generation gen. Offsets of one partition and generation arrive
// in increasing order; a gap (compacted or transactional records) counts
// as finished.
func (o *offsets) consumed(p int, off, gen int64) {
	po := o.parts[p]
	if po == nil || off < po.next || gen > po.gen {
		// First record of the partition, a rewind after a rebalance gave
		// the partition back, or its first record of a new generation (the
		// records of the last one not finished were dropped): start over
		// from here. Until then deliveries of the last generation still
		// finish their offsets here.
		o.parts[p] = &partOffsets{base: off, next: off + 1, mark: off, done: []bool{false}, gen: gen}
		return
	}
	for po.next < off { // a gap: nothing there to wait for
		po.done = append(po.done, true)
		po.next++
	}
	po.done = append(po.done, false)
	po.next = off + 1
	po.advance()
}

// finished marks offset off of partition p as done.
func (o *offsets) finished(p int, off int64) {
	po := o.parts[p]
	if po == nil || off < po.base || off >= po.next {
		return // from before a rewind: nothing to do
	}
	po.done[off-po.base] = true
	po.advance()
}

func (po *partOffsets) advance() {
	i := 0
	for i < len(po.done) && po.done[i] {
		i++
	}
	if i == 0 {
		return
	}
	po.base += int64(i)
	po.mark = po.base
	po.dirty = true
	// Drop the finished prefix; copy when it is most of the slice so the
	// backing array does not grow without bound.
	po.done = po.done[i:]
	if cap(po.done) > 1024 && len(po.done) < cap(po.done)/4 {
		po.done = append([]bool(nil), po.done...)
	}
}

// commits returns partition -> next offset to commit for partitions whose
// mark moved, and clears their dirty flags.
func (o *offsets) commits() map[int]int64 {
	var out map[int]int64
	for p, po := range o.parts {
		if po.dirty {
			if out == nil {
				out = map[int]int64{}
			}
			out[p] = po.mark
			po.dirty = false
		}
	}
	return out
}
