package timeline

import (
	"fmt"
	"testing"

	"github.com/danmaku/danmaku"
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
	if r := a.Rate(10); r != 0 {
		t.Errorf("rate of the first block %v, want unknown", r)
	}
	if r := a.Rate(1900); r < 990 || r > 1010 {
		t.Errorf("rate at 1900: %v, want 1000", r)
	}
	if r := a.Rate(2990); r < 99 || r > 101 {
		t.Errorf("rate at 2990: %v, want 100", r)
	}
}
