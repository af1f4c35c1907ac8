package comet

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
)

// busy makes the room's last live frame still being written, as when the
// drain pool has not reached its check yet.
func busy(s *Server, room string) {
	r := s.hub.room(room)
	r.mu.Lock()
	r.fanBusy = true
	r.liveSeq++
	r.mu.Unlock()
}

// While the room's last live frame is being written, pushes of normal
// messages are answered and held, and go out as one frame: with the
// room's check, ahead of a high-priority message (which is never held),
// or ahead of an event; a viewer that joins meanwhile gets them from the
// history once. The viewers see every position once, in order.
func TestHeldMessagesKeepTheOrder(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck = 0 })
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws, _ := joinWelcome(t, s, w.id, "")
	mustPush(t, p, s, w.write(2))
	expectRange(t, positions(readMsgs(t, ws, 2)), 1, 2)

	// Held, then sent by the room's check.
	busy(s, w.id)
	mustPush(t, p, s, w.write(2))
	mustPush(t, p, s, w.write(2))
	r := s.hub.room(w.id)
	r.mu.Lock()
	seq, held := r.liveSeq, len(r.held)
	r.mu.Unlock()
	if held != 4 {
		t.Fatalf("%d messages held, want 4", held)
	}
	s.fanDone(r, seq)
	f := mustReadOp(t, ws, danmaku.OpMsgs)
	expectRange(t, positions([]frame{f}), 3, 6)

	// Held, then sent ahead of a high-priority message, in its frame; a
	// viewer that joined while they were held has them once.
	busy(s, w.id)
	mustPush(t, p, s, w.write(2))
	late, _ := joinWelcome(t, s, w.id, "")
	w.high = func(n int) bool { return n == 9 }
	mustPush(t, p, s, w.write(1))
	w.high = nil
	f = mustReadOp(t, ws, danmaku.OpMsgs)
	expectRange(t, positions([]frame{f}), 7, 9)
	expectRange(t, positions(readMsgs(t, late, 9)), 1, 9)

	// Held, then sent ahead of a del event.
	busy(s, w.id)
	mustPush(t, p, s, w.write(1))
	w.delete(p, []string{w.id + "-10"}, s)
	f = mustReadOp(t, ws, danmaku.OpMsgs)
	expectRange(t, positions([]frame{f}), 10, 10)
	if f := mustReadOp(t, ws, danmaku.OpDel); !slices.Equal(f.IDs, []string{w.id + "-10"}) {
		t.Fatalf("del frame for %v", f.IDs)
	}
	expectNoFrame(t, ws, 100*time.Millisecond)
}

// In a room with capped viewers, high-priority messages pushed while the
// room's last frame is still being written to its viewers (2,000 of them
// in a process of their own, frames of 8 KB, pushes back to back) are
// held and go out together with the next frame: every viewer gets every
// one of them once, in the room's order, in fewer frames than pushes.
// Sent a frame each, a capped viewer got as many frames as there were
// pushes.
func TestCappedFramesFollowTheWrites(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck, c.MaxConnsPerIP = 0, 0 })
	p := push.NewClient(testSecret, 5*time.Second)
	defer p.Close()
	w := newTLRoom(t, store)
	w.content = strings.Repeat("x", 8000)
	w.high = func(int) bool { return true }
	const peers, pushes = 2000, 60
	defer peerViewers(t, s, w.id, peers, "-mode", "clients", "-addr", s.PublicAddr(), "-n", strconv.Itoa(peers),
		"-room", w.id+"&density=10")()
	var reads []func(time.Duration) got
	for _, q := range []string{"&density=10", "&density=10", ""} { // two capped viewers, one of the all tier
		ws := mustDial(t, s, "room="+w.id+q)
		mustReadOp(t, ws, opWelcome)
		reads = append(reads, collect(t, ws))
	}
	batches := make([]danmaku.Batch, pushes)
	for i := range batches {
		batches[i] = w.write(1)
	}
	for _, b := range batches {
		mustPush(t, p, s, b)
	}
	for i, read := range reads {
		g := read(time.Second)
		if err := checkRange(positions(g.frames), 1, pushes); err != nil {
			t.Fatalf("viewer %d: %v", i, err)
		}
		t.Logf("viewer %d: %d pushes in %d frames", i, pushes, len(g.frames))
		if len(g.frames) > pushes/2 {
			t.Errorf("viewer %d got %d frames for %d pushes sent while frames were being written", i, len(g.frames), pushes)
		}
	}
}
