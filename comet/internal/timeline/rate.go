package timeline

// The room's message rate, as density thinning needs it (package
// comet/internal/density): the same on every comet that follows the room,
// for every position, whenever it is asked. It is estimated once per block
// of rateBlock positions, from the ring's messages at or below the block's
// start, which every comet holding the room's timeline has when the
// block's first message arrives (positions come in order), and kept while
// the ring covers the block, so a replay of the block later thins it as
// the live frames did.

const (
	// rateBlock is the span of positions one estimate serves.
	rateBlock = 64
	// rateSpan is how many positions back an estimate looks: the rate over
	// the last rateSpan messages before the block.
	rateSpan = 512
	// rateMin is the fewest positions an estimate is made from; with
	// fewer (a new room, a ring just loaded) the rate is unknown and
	// nothing is thinned.
	rateMin = 32
)

// Rate returns the room's rate, in messages a second, for thinning the
// message at position p of the current epoch: estimated from the span of
// positions and server times of up to rateSpan ring messages at or below
// the start of p's block. 0 means unknown (no timeline, too few messages,
// no server times).
func (t *Timeline) Rate(p int64) float64 {
	if p <= 0 || t.Epoch == "" {
		return 0
	}
	b := (p - 1) / rateBlock
	if r, ok := t.rates[b]; ok {
		return r
	}
	r := t.estimate(b * rateBlock)
	if t.rates == nil {
		t.rates = map[int64]float64{}
	}
	if len(t.rates) >= rateBlock {
		for k := range t.rates {
			if (k+1)*rateBlock <= t.From {
				delete(t.rates, k)
			}
		}
	}
	t.rates[b] = r
	return r
}

// estimate is the rate over the ring's messages at or below position end.
func (t *Timeline) estimate(end int64) float64 {
	i := t.search(end) - 1
	if i < t.old {
		return 0
	}
	last := t.ring.at(i)
	j := max(t.old, t.search(last.Pos-rateSpan)-1)
	first := t.ring.at(j)
	n := last.Pos - first.Pos
	if n < rateMin || first.TS <= 0 || last.TS <= 0 {
		return 0
	}
	return float64(n) * 1000 / float64(max(last.TS-first.TS, 1))
}
