package timeline

import (
	"fmt"
	"math"
	"testing"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/density"
)

// The rate at a position is the same however the messages came in, and
// stays what it was when the block began, whatever came after.
func TestRate(t *testing.T) {
	var msgs []danmaku.Message
	for i := range 3000 {
		ts := int64(1_000_000 + i) // 1,000 a second
		if i >= 2000 {
			ts = 1_000_000 + 2000 + int64(i-2000)*10 // then 100 a second
		}
		msgs = append(msgs, danmaku.Message{ID: fmt.Sprint(i), TS: ts, Pos: int64(i + 1)})
	}
	a, b := New(65536, 30000, 100), New(65536, 30000, 100)
	a.SwitchEpoch("e")
	b.SwitchEpoch("e")
	for k := 0; k < len(msgs); k += 100 {
		a.Accept(msgs[k : k+100])
		b.Accept(msgs[k : k+33])
		b.Accept(msgs[k+33 : k+100])
	}
	for p := int64(1); p <= 3000; p++ {
		if a.Rate(p) != b.Rate(p) {
			t.Fatalf("position %d: rate %v on one timeline, %v on the other", p, a.Rate(p), b.Rate(p))
		}
	}
	for p := int64(1); p <= rateMinOwn; p++ {
		if r := a.Rate(p); r != 0 {
			t.Errorf("rate at %d: %v, want unknown (too few positions)", p, r)
		}
	}
	if r := a.Rate(10); r != 1000 {
		t.Errorf("rate at 10 (first block, from the positions up to it): %v, want 1000", r)
	}
	if r := a.BlockRate(10); r != 0 {
		t.Errorf("block rate of the first block %v, want unknown", r)
	}
	if r := a.Rate(1900); r < 990 || r > 1010 {
		t.Errorf("rate at 1900: %v, want 1000", r)
	}
	if r := a.Rate(2990); r < 99 || r > 101 {
		t.Errorf("rate at 2990: %v, want 100", r)
	}
}

// A capped tier keeps its cap's worth of a room that starts busy from the
// first 10 s on, within 5 %: the first block of positions is thinned too.
// The server times come in bursts (several messages a millisecond, as
// logic stamps a batch of sends), and the messages arrive in 200 ms
// frames.
func TestRateFirstWindow(t *testing.T) {
	for _, rate := range []int{100, 1000, 2000, 5000} {
		for _, burst := range []int{1, 8} {
			var msgs []danmaku.Message
			for i := range 20 * rate {
				ts := 1_000_000 + int64(i/burst*burst)*1000/int64(rate)
				msgs = append(msgs, danmaku.Message{ID: fmt.Sprint(i), TS: ts, Pos: int64(i + 1)})
			}
			tl := New(1<<17, 60000, 100)
			tl.SwitchEpoch("e")
			for k := 0; k < len(msgs); k += rate / 5 {
				tl.Accept(msgs[k:min(len(msgs), k+rate/5)])
			}
			for _, cp := range []int{10, 30, 60} {
				var wins [2]int
				for _, m := range msgs {
					if density.Keeps(density.Need(&m, tl.Rate(m.Pos)), cp) {
						wins[(m.TS-1_000_000)/10000]++
					}
				}
				for w, n := range wins {
					r := float64(n) / 10 / float64(cp)
					if w == 0 {
						t.Logf("%d/s, bursts of %d, cap %d: first window %.3f of the cap", rate, burst, cp, r)
					}
					if math.Abs(r-1) > 0.05 && cp < rate {
						t.Errorf("%d/s, bursts of %d, cap %d: window %d kept %d (%.3f of the cap)", rate, burst, cp, w+1, n, r)
					}
				}
			}
		}
	}
}

// In a quiet room's first block, a message after a pause is judged by the
// pause, not by the burst before it.
func TestRateAfterBurst(t *testing.T) {
	tl := New(1024, 60000, 100)
	tl.SwitchEpoch("e")
	var msgs []danmaku.Message
	for i := range 6 {
		msgs = append(msgs, danmaku.Message{ID: fmt.Sprint(i), TS: 1_000_000, Pos: int64(i + 1)})
	}
	msgs = append(msgs, danmaku.Message{ID: "late", TS: 1_060_000, Pos: 7})
	tl.Accept(msgs)
	if r := tl.Rate(6); r < 1000 {
		t.Errorf("rate within the burst %v, want its own (5 positions in a millisecond)", r)
	}
	if r := tl.Rate(7); r > 1 {
		t.Errorf("rate a minute after the burst %v, want 0.1 a second", r)
	}
}
