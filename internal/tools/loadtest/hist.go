package loadtest

import (
	"math/bits"
	"time"
)

// histBuckets is the size of a Hist: values up to 2^36 µs (about 19 hours)
// with 32 sub-buckets per power of two, so a percentile is exact to about 3%.
const histBuckets = 1024

// Hist is a log-linear latency histogram in microseconds. It is a plain
// array so it can be merged by addition and sent between processes; the zero
// value is empty.
type Hist struct {
	Counts [histBuckets]uint64
}

func histIndex(us uint64) int {
	if us < 64 {
		return int(us)
	}
	if us >= 1<<36 {
		return histBuckets - 1
	}
	shift := bits.Len64(us) - 6
	return (shift+1)*32 + int(us>>uint(shift)) - 32
}

// histValue is the middle of bucket i in microseconds.
func histValue(i int) float64 {
	if i < 64 {
		return float64(i)
	}
	shift := i/32 - 1
	low := uint64(i%32+32) << uint(shift)
	return float64(low) + float64(uint64(1)<<uint(shift))/2
}

// Add records one latency.
func (h *Hist) Add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.Counts[histIndex(uint64(d/time.Microsecond))]++
}

// Merge adds o into h.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
}

// minus returns the values of h that are not in o, o being a part of h.
func (h *Hist) minus(o *Hist) *Hist {
	d := *h
	for i, c := range o.Counts {
		d.Counts[i] -= min(c, d.Counts[i])
	}
	return &d
}

// Total is the number of recorded values.
func (h *Hist) Total() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Quantile returns the value below which fraction q of the values lie, in
// milliseconds; 0 when empty.
func (h *Hist) Quantile(q float64) float64 {
	total := h.Total()
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank {
			return histValue(i) / 1000
		}
	}
	return h.Max()
}

// Max is the largest recorded value in milliseconds (bucket precision).
func (h *Hist) Max() float64 {
	for i := histBuckets - 1; i >= 0; i-- {
		if h.Counts[i] > 0 {
			return histValue(i) / 1000
		}
	}
	return 0
}

// sparse is the wire form of a Hist: only the non-empty buckets.
type sparse struct {
	I []int    `json:"i"`
	C []uint64 `json:"c"`
}

func (h *Hist) sparse() sparse {
	var s sparse
	for i, c := range h.Counts {
		if c > 0 {
			s.I = append(s.I, i)
			s.C = append(s.C, c)
		}
	}
	return s
}

func (s sparse) addTo(h *Hist) {
	for k, i := range s.I {
		if i >= 0 && i < histBuckets && k < len(s.C) {
			h.Counts[i] += s.C[k]
		}
	}
}
