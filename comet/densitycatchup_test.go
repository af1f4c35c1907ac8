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

// account reads ws's msgs frames until none comes for quiet and adds
// their normal messages and skipped counts to normal and skipped; it
// returns the position a resume goes on after: the largest of the
// messages' positions and the frames' through.
func account(t *testing.T, ws *wsviewer.Conn, quiet time.Duration, normal, skipped *int64) (top int64) {
	t.Helper()
	for {
		f, _, err := ws.Next(quiet)
		if err != nil {
			return top
		}
		if f.Msgs == nil {
			continue
		}
		b := f.Msgs
		*skipped += b.Skipped
		top = max(top, b.Through)
		for _, m := range b.Msgs {
			top = max(top, m.Pos)
			if m.Priority != danmaku.PriorityHigh {
				*normal++
			}
		}
	}
}

// TestDensityResumeSkippedOnce: a capped viewer whose last frame counted
// as skipped messages after its last kept one leaves and resumes after
// the position the frame accounts for (through); its two connections'
// normal messages and skipped counts add up to every normal message
// pushed, each once. Without through it resumed after its last message,
// and the replay counted the messages left out after it again.
func TestDensityResumeSkippedOnce(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) { c.HistoryOnJoin, c.DensityFlush = 0, 0 })
	p := push.NewClient(testSecret, 5*time.Second)
	defer p.Close()
	feed := newDensityFeed(testkit.Uniq("resume-"), 2000, 1000, 100)
	q := "room=" + feed.room + "&density=10"
	first := mustDial(t, s, q)
	mustReadOp(t, first, opWelcome)
	for k := range 10 {
		mustPush(t, p, s, feed.batch(k))
	}
	var normal, skipped int64
	top := account(t, first, 500*time.Millisecond, &normal, &skipped)
	first.Close()
	for k := 10; k < feed.batches(); k++ {
		mustPush(t, p, s, feed.batch(k))
	}
	again := mustDial(t, s, fmt.Sprintf("%s&since=%d&epoch=%s", q, top, feed.epoch))
	if w := mustReadOp(t, again, opWelcome); w.Recovered == nil || !*w.Recovered {
		t.Fatalf("resume after %d not recovered", top)
	}
	account(t, again, 500*time.Millisecond, &normal, &skipped)
	var want int64
	for _, m := range feed.msgs {
		if m.Priority != danmaku.PriorityHigh {
			want++
		}
	}
	if normal+skipped != want {
		t.Fatalf("%d normal + %d skipped over a resume after %d, want %d", normal, skipped, top, want)
	}
}
