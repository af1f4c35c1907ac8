package comet

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
)

// job sends a room's next delivery only once the comet has answered the
// last one, with every message that came meanwhile, high-priority ones
// included; the comet answers a push once its frame is in every local
// viewer's queue, the drains woken as it queues, so the writes of a frame
// to a crowd compete with the answer for the cores. Frames so follow the
// pace of the comet: with a high-priority message of 2 KB coming every
// millisecond for a room of 2,000 capped viewers (in a process of their
// own), a pusher that works as job does sends a third of the pushes there
// were messages or fewer, every viewer gets no more frames than pushes,
// each message once and in the room's order. A comet that answered before
// it queued the frames would take a push, and give every viewer a frame,
// for about every message.
func TestCappedFramesFollowTheWrites(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck, c.MaxConnsPerIP = 0, 0 })
	p := push.NewClient(testSecret, 5*time.Second)
	defer p.Close()
	w := newTLRoom(t, store)
	w.content = strings.Repeat("x", 2000)
	w.high = func(int) bool { return true }
	const peers, msgs, every = 2000, 300, time.Millisecond
	defer peerViewers(t, s, w.id, peers, "-mode", "clients", "-addr", s.PublicAddr(), "-n", strconv.Itoa(peers),
		"-room", w.id+"&density=10")()
	var reads []func(time.Duration) got
	for _, q := range []string{"&density=10", "&density=10", ""} { // two capped viewers, one of the all tier
		ws := mustDial(t, s, "room="+w.id+q)
		mustReadOp(t, ws, opWelcome)
		reads = append(reads, collect(t, ws))
	}
	all := w.write(msgs)
	pushes := pushAsJob(t, p, s, all, every)
	t.Logf("%d messages, one every %v, in %d pushes", msgs, every, pushes)
	if pushes > msgs/3 {
		t.Errorf("%d pushes for %d messages: the pushes did not wait for the writes", pushes, msgs)
	}
	for i, read := range reads {
		g := read(time.Second)
		if err := checkRange(positions(g.frames), 1, msgs); err != nil {
			t.Fatalf("viewer %d: %v", i, err)
		}
		if len(g.frames) > pushes {
			t.Errorf("viewer %d got %d frames for %d pushes", i, len(g.frames), pushes)
		}
	}
}

// pushAsJob pushes b's messages as job would had the i-th of them come
// at i*every: each push carries every message come since the last one,
// and waits for the comet's answer. It returns the number of pushes.
func pushAsJob(tb testing.TB, p *push.Client, s *Server, b danmaku.Batch, every time.Duration) int {
	start, sent, pushes := time.Now(), 0, 0
	for sent < len(b.Msgs) {
		come := min(int(time.Since(start)/every)+1, len(b.Msgs))
		if come == sent {
			time.Sleep(time.Until(start.Add(time.Duration(come) * every)))
			continue
		}
		part := b
		part.Msgs = b.Msgs[sent:come]
		mustPush(tb, p, s, part)
		sent, pushes = come, pushes+1
	}
	return pushes
}
