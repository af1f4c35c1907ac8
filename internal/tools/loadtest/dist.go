package loadtest

import (
	"fmt"
	"math"
	"sort"
)

// Layout places viewers and messages in rooms: weights sum to one and say
// what share of the viewers (and of the messages) each room gets.
type Layout struct {
	Rooms   []string
	Weights []float64
	// Viewers is the number of viewers of each room, summing to the total.
	Viewers []int
	cum     []float64
}

// NewLayout spreads n viewers over rooms rooms. With zipf > 0 room k gets a
// share proportional to 1/(k+1)^zipf; otherwise room 0 gets hot of the
// viewers and the others share the rest evenly.
func NewLayout(prefix string, rooms, n int, hot, zipf float64) (*Layout, error) {
	if rooms < 1 {
		return nil, fmt.Errorf("rooms must be at least 1")
	}
	if hot < 0 || hot > 1 {
		return nil, fmt.Errorf("hot share must be within 0..1")
	}
	l := &Layout{Rooms: make([]string, rooms), Weights: make([]float64, rooms)}
	for i := range l.Rooms {
		l.Rooms[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	switch {
	case rooms == 1:
		l.Weights[0] = 1
	case zipf > 0:
		var sum float64
		for i := range l.Weights {
			l.Weights[i] = 1 / math.Pow(float64(i+1), zipf)
			sum += l.Weights[i]
		}
		for i := range l.Weights {
			l.Weights[i] /= sum
		}
	default:
		l.Weights[0] = hot
		for i := 1; i < rooms; i++ {
			l.Weights[i] = (1 - hot) / float64(rooms-1)
		}
	}
	// Largest remainders, so the counts add up to n exactly.
	l.Viewers = make([]int, rooms)
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, rooms)
	left := n
	for i, w := range l.Weights {
		x := w * float64(n)
		l.Viewers[i] = int(x)
		left -= l.Viewers[i]
		rems[i] = rem{i, x - float64(l.Viewers[i])}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; left > 0; k++ {
		l.Viewers[rems[k%rooms].i]++
		left--
	}
	l.cum = make([]float64, rooms)
	var c float64
	for i, w := range l.Weights {
		c += w
		l.cum[i] = c
	}
	return l, nil
}

// ViewerRoom is the room of viewer i (0 <= i < total): rooms are filled in
// order, so every process computes the same assignment.
func (l *Layout) ViewerRoom(i int) int {
	for r, n := range l.Viewers {
		if i < n {
			return r
		}
		i -= n
	}
	return len(l.Viewers) - 1
}

// MessageRoom picks the room of message seq by the room weights, from a
// hash of seq so the choice is reproducible.
func (l *Layout) MessageRoom(seq uint64) int {
	u := float64(mix64(seq)>>11) / float64(1<<53)
	r := sort.SearchFloat64s(l.cum, u)
	if r >= len(l.cum) {
		r = len(l.cum) - 1
	}
	return r
}

// mix64 scrambles seq into a well-spread 64-bit value (a SplitMix64 step),
// for reproducible random choices.
func mix64(seq uint64) uint64 {
	x := seq*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return x
}
