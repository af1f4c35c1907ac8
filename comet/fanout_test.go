package comet

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// The fan-out workers take the chunks of a frame with a high-priority
// message before the chunks of window frames queued earlier, each lane in
// the order it came.
func TestFanOutTakesTheHighLaneFirst(t *testing.T) {
	p := &fanPool{wake: make(chan struct{}, 64)}
	p.once.Do(func() {}) // no workers: the test takes the chunks itself
	conns := func(n int) []*conn {
		out := make([]*conn, n)
		for i := range out {
			out[i] = &conn{seq: uint64(i)}
		}
		return out
	}
	normal1, normal2, high := conns(fanChunk+1), conns(fanChunk), conns(2*fanChunk)
	p.flush(normal1, false)
	p.flush(high, true)
	p.flush(normal2, false)
	var got []string
	for c := p.take(); c != nil; c = p.take() {
		switch &c[0] {
		case &high[0], &high[fanChunk]:
			got = append(got, "high")
		case &normal1[0], &normal1[fanChunk]:
			got = append(got, "normal1")
		case &normal2[0]:
			got = append(got, "normal2")
		}
	}
	if want := "[high high normal1 normal1 normal2]"; fmt.Sprint(got) != want {
		t.Fatalf("chunks taken %v, want %s", got, want)
	}
}

// Window frames and frames with high-priority messages pushed back to
// back reach every viewer once each, in the room's order, with their
// priority; the fan-out lag is measured for both lanes.
func TestFanOutKeepsEachViewersOrder(t *testing.T) {
	s, store := mustStart(t, func(*Config) {})
	w := newTLRoom(t, store)
	w.high = func(n int) bool { return n%7 == 0 }
	const viewers, pushes, per = 48, 30, 5
	conns := make([]*wsviewer.Conn, viewers)
	for i := range conns {
		conns[i], _ = joinWelcome(t, s, w.id, "")
	}
	for range pushes {
		s.Broadcast(w.write(per))
	}
	last := int64(pushes * per)
	for i, ws := range conns {
		frames := readMsgs(t, ws, last)
		if err := checkRange(positions(frames), 1, last); err != nil {
			t.Fatalf("viewer %d: %v", i, err)
		}
		for _, f := range frames {
			for _, m := range f.Msgs {
				if m.Priority.High() != w.high(int(m.Pos)) {
					t.Fatalf("viewer %d: position %d with priority %v", i, m.Pos, m.Priority)
				}
			}
		}
	}
	for _, lane := range []string{"normal", "high"} {
		var m dto.Metric
		if err := s.metrics.fanoutLag.WithLabelValues(lane).(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		if m.Histogram.GetSampleCount() == 0 {
			t.Errorf("no fan-out lag observed for lane %s", lane)
		}
	}
}
