package comet

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/density"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// catchUpFeed is a room of the catch-up test: its messages, a capped
// viewer that reads nothing until told, and how many messages were pushed.
type catchUpFeed struct {
	densityFeed
	ws     *wsviewer.Conn
	pushed int
}

// newCatchUpFeed makes a room of n messages of 4,000 bytes at 1,000 a
// second, one in every hundred of the first thousand high priority, and
// dials its capped (10/s) viewer with a tiny socket buffer.
func newCatchUpFeed(t *testing.T, s *Server, n int) *catchUpFeed {
	room := testkit.Uniq("catchup-")
	f := &catchUpFeed{densityFeed: densityFeed{room: room, epoch: "e" + room}}
	base := time.Now().UnixMilli()
	text := strings.Repeat("x", 4000)
	for i := range n {
		m := danmaku.Message{ID: fmt.Sprintf("%s-%06d", room, i), UID: int64(100 + i%50), Name: "n",
			Content: text, TS: base + int64(i), Pos: int64(i + 1)}
		if i < 1000 && i%100 == 50 {
			m.Priority = danmaku.PriorityHigh
		}
		f.msgs = append(f.msgs, m)
	}
	ws, _, err := smallBufferDialer.Dial(wsURL(s, "room="+room+"&density=10"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	f.ws = wsviewer.Wrap(ws)
	mustReadOp(t, f.ws, opWelcome)
	return f
}

// push pushes the next n messages as one batch.
func (f *catchUpFeed) push(t *testing.T, p *push.Client, s *Server, n int) {
	b := danmaku.NewBatch(f.room, f.msgs[f.pushed:f.pushed+n])
	b.Epoch = f.epoch
	mustPush(t, p, s, b)
	f.pushed += n
}

// sent is the feed of what was pushed.
func (f *catchUpFeed) sent() densityFeed {
	d := f.densityFeed
	d.msgs = d.msgs[:f.pushed]
	return d
}

// TestDensityCatchUpSkippedOnce: a capped viewer that stops reading while
// high-priority messages make its tier send frame after frame overflows its
// queue; its tier then holds normal messages back (density_flush), and the
// viewer reads again and is caught up from the ring, which accounts for
// every position up to the room's last, held ones included. The frame its
// tier sends next must count as skipped only what the catch-up did not.
// In room over, more batches come after the catch-up, so the held frame
// carries messages the viewer lacks; in room under, only messages the tier
// leaves out, so the held frame has nothing new but its skipped count. In
// both the viewer's normal messages and skipped counts add up to every
// normal message pushed, each once, positions in order.
func TestDensityCatchUpSkippedOnce(t *testing.T) {
	const flush = 2 * time.Second
	s, _ := mustStart(t, func(c *Config) {
		slowConfig(c)
		c.WriteWait, c.DensityFlush = 10*time.Second, flush
	})
	p := push.NewClient(testSecret, 5*time.Second)
	defer p.Close()
	over, under := newCatchUpFeed(t, s, 2000), newCatchUpFeed(t, s, 2000)
	both := []*catchUpFeed{over, under}
	for range 13 { // ten batches with a high-priority message each, then three held
		for _, f := range both {
			f.push(t, p, s, 100)
		}
	}
	readers := []*timedFrames{readTimed(over.ws), readTimed(under.ws)}
	expectValue(t, s.metrics.catchUps, 2, "catch-ups")
	over.push(t, p, s, 100)
	over.push(t, p, s, 100)
	for p := int64(under.pushed + 1); p <= int64(under.pushed+3); p++ {
		if density.Rank(p) < 0.05 {
			t.Fatalf("position %d would be kept by the 10/s tier", p)
		}
	}
	under.push(t, p, s, 3)
	time.Sleep(flush + 500*time.Millisecond) // the held frames go out
	for _, f := range both {
		for range 3 {
			f.push(t, p, s, 100)
		}
	}
	time.Sleep(flush + 500*time.Millisecond)
	if v := value(t, s.metrics.slowConsumers); v != 0 {
		t.Fatalf("%v viewers cut, want 0", v)
	}
	for i, name := range []string{"over", "under"} {
		t.Run(name, func(t *testing.T) {
			g := readers[i].got()
			checkOrdered(t, name, g)
			checkCounts(t, g, both[i].sent())
		})
	}
}
