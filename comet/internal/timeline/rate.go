package timeline

// The room's message rate, as density thinning needs it (package
// comet/internal/density): the same on every comet that follows the room,
// for every position, whenever it is asked. It is estimated once per block
// of rateBlock positions, from the ring's messages at or below the block's
// start, which every comet holding the room's timeline has when the
// block's first message arrives (positions come in order), and kept while
// the ring covers the block, so a replay of the block later thins it as
// the live frames did.
//
// A block whose start has too little before it (the first block of an
// epoch, the first after a comet began following a room mid-epoch) is
// estimated per position instead: the rate at p is the one over the
// ring's messages up to p itself (its server time included, so a message
// after a pause is not judged by a burst before it), from the fourth
// position on. So a room that starts busy is thinned from its first
// messages, not after its first block; each estimate is kept while the
// ring covers its position, so replays thin as the live frames did.

const (
	// rateBlock is the span of positions one estimate serves.
	rateBlock = 64
	// rateSpan is how many positions back an estimate looks: the rate over
	// the last rateSpan messages before the block.
	rateSpan = 512
	// rateMin is the fewest positions a block's estimate is made from;
	// with fewer (a new room, a ring just loaded) the block is estimated
	// per position.
	rateMin = 32
	// rateMinOwn is the fewest positions a per-position estimate is made
	// from; with fewer the rate is unknown and the message is not thinned.
	rateMinOwn = 3
)

// Rate returns the room's rate, in messages a second, for thinning the
// message at position p of the current epoch: the estimate of p's block
// (BlockRate), or, for a block without one, the rate over up to rateSpan
// ring messages up to p. 0 means unknown (no timeline, too few messages,
// no server times).
func (t *Timeline) Rate(p int64) float64 {
	if r := t.BlockRate(p); r > 0 || p <= 0 || t.Epoch == "" {
		return r
	}
	if r, ok := t.own[p]; ok {
		return r
	}
	r := t.estimate(p, rateMinOwn)
	if r > 0 {
		if t.own == nil {
			t.own = map[int64]float64{}
		}
		t.own[p] = r
	}
	return r
}

// BlockRate returns the rate of p's block: estimated from the span of
// positions and server times of up to rateSpan ring messages at or below
// the start of the block. 0 means unknown (no timeline, fewer than
// rateMin positions, no server times). It is the room's sustained rate,
// which a burst of a few messages does not move.
func (t *Timeline) BlockRate(p int64) float64 {
	if p <= 0 || t.Epoch == "" {
		return 0
	}
	b := (p - 1) / rateBlock
	if r, ok := t.rates[b]; ok {
		return r
	}
	r := t.estimate(b*rateBlock, rateMin)
	if t.rates == nil {
		t.rates = map[int64]float64{}
	}
	if len(t.rates) >= rateBlock {
		t.pruneRates()
	}
	t.rates[b] = r
	return r
}

// pruneRates forgets the estimates of positions the ring no longer covers.
func (t *Timeline) pruneRates() {
	for k := range t.rates {
		if (k+1)*rateBlock <= t.From {
			delete(t.rates, k)
		}
	}
	for p := range t.own {
		if p <= t.From {
			delete(t.own, p)
		}
	}
}

// estimate is the rate over the ring's messages at or below position end,
// or 0 when they span fewer than least positions.
func (t *Timeline) estimate(end int64, least int64) float64 {
	i := t.search(end) - 1
	if i < t.old {
		return 0
	}
	last := t.ring.at(i)
	j := max(t.old, t.search(last.Pos-rateSpan)-1)
	first := t.ring.at(j)
	n := last.Pos - first.Pos
	if n < least || first.TS <= 0 || last.TS <= 0 {
		return 0
	}
	return float64(n) * 1000 / float64(max(last.TS-first.TS, 1))
}
