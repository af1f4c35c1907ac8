package loadtest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestHistQuantiles(t *testing.T) {
	var h Hist
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 500}, {0.99, 990}, {1, 1000}} {
		got := h.Quantile(c.q)
		if got < c.want*0.96 || got > c.want*1.04 {
			t.Errorf("q%.2f = %.1f ms, want about %.0f", c.q, got, c.want)
		}
	}
	var m Hist
	h.sparse().addTo(&m)
	if m.Total() != 1000 || m.Quantile(0.5) != h.Quantile(0.5) {
		t.Errorf("sparse round trip: total %d", m.Total())
	}
	var late Hist
	for i := 901; i <= 1000; i++ {
		late.Add(time.Duration(i) * time.Millisecond)
	}
	if rest := h.minus(&late); rest.Total() != 900 || rest.Max() > 900*1.04 || h.Total() != 1000 {
		t.Errorf("minus: %d left, max %.1f ms; h %d", rest.Total(), rest.Max(), h.Total())
	}
}

func TestLayout(t *testing.T) {
	l, err := NewLayout("r", 5, 1001, 0.8, 0)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, n := range l.Viewers {
		sum += n
	}
	if sum != 1001 || l.Viewers[0] != 801 {
		t.Fatalf("viewers %v", l.Viewers)
	}
	if l.ViewerRoom(0) != 0 || l.ViewerRoom(800) != 0 || l.ViewerRoom(801) != 1 || l.ViewerRoom(1000) != 4 {
		t.Fatalf("rooms of viewers")
	}
	hot := 0
	for i := uint64(0); i < 10000; i++ {
		if l.MessageRoom(i) == 0 {
			hot++
		}
	}
	if hot < 7700 || hot > 8300 {
		t.Fatalf("hot room got %d of 10000 messages", hot)
	}
	z, _ := NewLayout("r", 2000, 20000, 0, 1)
	if z.Viewers[0] <= z.Viewers[1] || z.Viewers[1] <= z.Viewers[100] {
		t.Fatalf("zipf viewers %v", z.Viewers[:3])
	}
}

// frameOf builds a msgs frame as comet sends it.
func frameOf(room string, seqs ...int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"op":"msgs","room":%q,"msgs":[`, room)
	for k, s := range seqs {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"0lt0l%03d","uid":1,"name":"lt","content":"lt:%d:%d","ts":1}`, s, s, time.Now().UnixNano())
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func TestFrameScan(t *testing.T) {
	p := NewPool(PoolSpec{Rooms: []string{"a"}, RoomViewers: []int{2}, From: 0, To: 2, ExactEvery: 2})
	exact, counted := p.viewers[0], p.viewers[1]
	if !exact.exact || counted.exact {
		t.Fatal("viewer 0 should be exact, viewer 1 counted")
	}
	key := []byte(`"room":"a"`)
	sh := &p.shards[0]
	now := time.Now().UnixNano()
	p.frame(exact, sh, frameOf("a", 0, 1, 2), now, key)
	p.frame(exact, sh, frameOf("a", 2, 3), now, key)
	p.frame(exact, sh, frameOf("b", 4), now, key)
	p.frame(counted, sh, frameOf("a", 0, 1, 2), now, key)
	if exact.msgs != 5 || exact.dups != 1 || exact.misrouted != 1 {
		t.Fatalf("exact: msgs %d dups %d misrouted %d", exact.msgs, exact.dups, exact.misrouted)
	}
	if exact.bits[0] != 0b1111 {
		t.Fatalf("bits %b", exact.bits[0])
	}
	if counted.msgs != 3 {
		t.Fatalf("counted msgs %d", counted.msgs)
	}
	if got := sh.hist.Total(); got != 4 {
		t.Fatalf("latencies %d, want 4 (duplicates not counted)", got)
	}
}
