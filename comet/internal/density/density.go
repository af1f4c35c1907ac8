// Package density decides which messages of a room a viewer with a density
// cap is sent. A comet serves a few tiers (caps in normal messages a
// second, plus the all tier); each batch is thinned and encoded once per
// tier, never per viewer.
//
// The rule is deterministic, so every comet and every replay of the same
// positions keeps the same subset: a message's need is its rank (from its
// position in the room's timeline, spread evenly over [0,1)) times the
// room's rate at its position (messages a second, estimated from the
// timeline, see timeline.Rate), and a tier of cap C keeps it when
// need < C. A tier thus keeps each normal message with
// probability C/rate, about C a second, and the subsets are nested: what
// a lower tier keeps, every higher one keeps too. High-priority messages
// have need 0 and are kept by every tier.
package density

import (
	"fmt"
	"math"

	"github.com/danmaku/danmaku"
)

// MaxCaps bounds the caps of a comet's tiers: every batch may be encoded
// once per tier.
const MaxCaps = 7

// Tiers is a comet's set of density caps, ascending, and the all tier
// after them. A tier is named by its slot: 0 to len(caps)-1 for the caps,
// All() for every message.
type Tiers struct{ caps []int }

// NewTiers checks caps (ascending, positive, at most MaxCaps) and returns
// the tiers.
func NewTiers(caps []int) (Tiers, error) {
	if len(caps) > MaxCaps {
		return Tiers{}, fmt.Errorf("at most %d caps", MaxCaps)
	}
	for i, c := range caps {
		if c < 1 || c > 100000 {
			return Tiers{}, fmt.Errorf("cap %d: must be between 1 and 100000", c)
		}
		if i > 0 && c <= caps[i-1] {
			return Tiers{}, fmt.Errorf("caps must be ascending: %d after %d", c, caps[i-1])
		}
	}
	return Tiers{caps: append([]int(nil), caps...)}, nil
}

// Slots is the number of tiers, the all tier included.
func (t Tiers) Slots() int { return len(t.caps) + 1 }

// All is the slot of the all tier.
func (t Tiers) All() int { return len(t.caps) }

// Cap is the cap of slot: normal messages a second, 0 for the all tier.
func (t Tiers) Cap(slot int) int {
	if slot < 0 || slot >= len(t.caps) {
		return 0
	}
	return t.caps[slot]
}

// Slot is the tier serving a viewer that asks for at most max normal
// messages a second: the largest cap not above max, the smallest cap when
// max is below every cap, the all tier when max is 0 (or negative) or the
// comet has no caps.
func (t Tiers) Slot(max int) int {
	if max <= 0 || len(t.caps) == 0 {
		return t.All()
	}
	s := 0
	for i, c := range t.caps {
		if c <= max {
			s = i
		}
	}
	return s
}

// Rank places position p in [0,1): the fractional part of p times the
// golden ratio's inverse (a Weyl sequence). Consecutive positions spread
// evenly over [0,1), so any run of n positions holds about n*x ranks below
// x, within a few: a tier keeps its share of every stretch of the room,
// not just on average, and no sender or moment is favoured.
func Rank(p int64) float64 {
	const phi = 0.6180339887498949
	_, f := math.Modf(float64(p) * phi)
	return f
}

// Need is the smallest cap that keeps m when its room runs at rate
// messages a second: 0 (every tier keeps it) for a high-priority message
// or an unknown rate.
func Need(m *danmaku.Message, rate float64) float64 {
	if m.Priority == danmaku.PriorityHigh || rate <= 0 || m.Pos <= 0 {
		return 0
	}
	return Rank(m.Pos) * rate
}

// Keeps reports whether a tier of cap keeps a message of need.
func Keeps(need float64, cap int) bool { return cap == 0 || need < float64(cap) }

// Thin appends to dst the messages of msgs a tier of cap keeps (needs[i]
// is msgs[i]'s need) and returns them with the number of normal messages
// left out.
func Thin(dst, msgs []danmaku.Message, needs []float64, cap int) (kept []danmaku.Message, skipped int64) {
	for i := range msgs {
		if Keeps(needs[i], cap) {
			dst = append(dst, msgs[i])
		} else {
			skipped++
		}
	}
	return dst, skipped
}
