package loadtest

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseTiers(t *testing.T) {
	mix, err := ParseTiers("30:0.9, 60:0.09,all:0.01")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(mix) != "[{30 0.9} {60 0.09} {0 0.01}]" {
		t.Fatalf("mix %v", mix)
	}
	for _, bad := range []string{"30", "x:1", "0:1", "30:0.5", "30:0.5,all:0.6", "all:0"} {
		if _, err := ParseTiers(bad); err == nil {
			t.Errorf("ParseTiers(%q) accepted", bad)
		}
	}
}

// The viewers of each tier come in their share, spread over the indices:
// every slice of consecutive viewers (a worker process, a comet) holds
// about its share of each.
func TestTierOfSpread(t *testing.T) {
	mix, _ := ParseTiers("30:0.99,all:0.01")
	for _, span := range [][2]int{{0, 50000}, {0, 12500}, {37500, 50000}} {
		all := 0
		for i := span[0]; i < span[1]; i++ {
			if tierOf(mix, i) == 0 {
				all++
			}
		}
		want := (span[1] - span[0]) / 100
		if all < want-2 || all > want+2 {
			t.Errorf("viewers %v: %d on the all tier, want %d", span, all, want)
		}
	}
	if tierOf(nil, 7) != 0 {
		t.Error("no mix: want the all tier")
	}
}

// msgsFrame is a msgs frame of normal (lt) and high (lh) load-test
// messages sent at ns, with a skipped count when skipped > 0.
func msgsFrame(normal, high []uint64, ns int64, skipped int) []byte {
	var b strings.Builder
	b.WriteString(`{"op":"msgs","room":"r","epoch":"e","msgs":[`)
	k := 0
	for _, s := range normal {
		if k++; k > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"m%d","uid":1,"name":"lt","content":"lt:%d:%d","ts":1,"pos":%d}`, s, s, ns, k)
	}
	for _, s := range high {
		if k++; k > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"h%d","uid":1,"name":"lt","content":"lh:%d:%d","ts":1,"priority":1,"pos":%d}`, s, s, ns, k)
	}
	b.WriteString(`]`)
	if skipped > 0 {
		fmt.Fprintf(&b, `,"skipped":%d`, skipped)
	}
	b.WriteString(`}`)
	return []byte(b.String())
}

// A capped viewer's normal messages count in the window of their send
// time; high messages are accounted apart, once, and a repeat of either
// is a duplicate; skipped counts add up.
func TestLaneFrame(t *testing.T) {
	mark := time.Now().Add(-time.Minute).UnixNano()
	p := NewPool(PoolSpec{Rooms: []string{"r"}, RoomViewers: []int{2}, From: 0, To: 2,
		Tiers: []TierShare{{Max: 30, Share: 1}}, High: true, SendFor: 30 * time.Second})
	p.markNs.Store(mark)
	v := p.viewers[0]
	if v.lane.cap != 30 || !v.exact {
		t.Fatalf("viewer cap %d exact %v", v.lane.cap, v.exact)
	}
	sh := &p.shards[0]
	now := time.Now().UnixNano()
	frame := func(b []byte) (uint64, uint64) {
		return p.laneFrame(v, sh, sh.sec(now/1e9), b, now, false, false)
	}
	in := func(w time.Duration) int64 { return mark + int64(w) }
	if n, h := frame(msgsFrame([]uint64{1, 2, 3}, []uint64{0}, in(time.Second), 40)); n != 3 || h != 1 {
		t.Fatalf("first frame: %d normal, %d high", n, h)
	}
	if n, h := frame(msgsFrame([]uint64{4}, []uint64{1}, in(12*time.Second), 7)); n != 1 || h != 1 {
		t.Fatalf("second frame: %d normal, %d high", n, h)
	}
	// Repeats of a normal and a high message.
	if n, h := frame(msgsFrame([]uint64{4}, []uint64{0}, in(13*time.Second), 0)); n != 0 || h != 0 || v.dups != 2 {
		t.Fatalf("repeats: %d normal, %d high, %d dups", n, h, v.dups)
	}
	if fmt.Sprint(v.lane.wins) != "[3 1]" || v.lane.skipped != 47 || v.lane.highs != 2 {
		t.Fatalf("windows %v, skipped %d, high %d", v.lane.wins, v.lane.skipped, v.lane.highs)
	}
	if sh.highHist.Total() != 2 || sh.hist.Total() != 4 {
		t.Fatalf("latencies: %d high, %d normal", sh.highHist.Total(), sh.hist.Total())
	}
}

// tierResult judges every full window: 300 messages in 10 s is a cap of
// 30 met, 280 is 6.7 % under it.
func TestTierResult(t *testing.T) {
	var v viewer
	v.lane.cap = 30
	v.lane.wins = []uint32{300, 290, 280, 5}
	res := map[int]*TierResult{}
	v.tierResult(res, 3)
	r := res[30]
	if r.Windows != 3 || r.Within != 2 || r.ViewersWithin != 0 || r.Viewers != 1 {
		t.Fatalf("%+v", r)
	}
	if q := r.ratioQuantile(0); q != 0.933 {
		t.Fatalf("lowest window ratio %.3f, want 0.933", q)
	}
	v.lane.wins = []uint32{300, 305, 295}
	v.tierResult(res, 3)
	if r.ViewersWithin != 1 || r.Viewers != 2 || r.ratioQuantile(1) != 1.017 {
		t.Fatalf("%+v", r)
	}
}

// Windows are also summed one by one, and merge across workers.
func TestTierByWindow(t *testing.T) {
	a, b := map[int]*TierResult{}, map[int]*TierResult{}
	for _, wins := range [][]uint32{{360, 300}, {300, 301}} {
		var v viewer
		v.lane.cap, v.lane.wins = 30, wins
		v.tierResult(a, 2)
		v.tierResult(b, 2)
	}
	a[30].merge(b[30])
	w := a[30].ByWindow
	if len(w) != 2 || w[0].Viewers != 4 || w[0].Within != 2 || w[1].Within != 4 || math.Abs(w[0].RatioSum-4.4) > 1e-9 {
		t.Fatalf("by window %+v", w)
	}
}
