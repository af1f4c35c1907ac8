package comet

import (
	"fmt"
	"testing"
)

// everyFifth makes every fifth message of a tlRoom high priority.
func everyFifth(n int) bool { return n%5 == 0 }

// checkLanes fails unless the messages of frames, of a tlRoom written
// with everyFifth, carry their priority.
func checkLanes(tb testing.TB, frames []frame) {
	tb.Helper()
	for _, f := range frames {
		for _, m := range f.Msgs {
			if m.Priority.High() != everyFifth(int(m.Pos)) {
				tb.Fatalf("position %d arrived with priority %v (replay %v)", m.Pos, m.Priority, f.Replay)
			}
		}
	}
}

// A viewer that resumes on a comet that never saw the room gets what it
// missed from the room's history in Redis with the high-priority messages
// still marked. (TestSlowViewerCaughtUp checks a catch-up from the ring.)
func TestResumeKeepsHighPriority(t *testing.T) {
	s, store := mustStart(t, func(*Config) {})
	w := newTLRoom(t, store)
	w.high = everyFifth
	w.write(20)
	ws, welcome := joinWelcome(t, s, w.id, fmt.Sprintf("since=3&epoch=%s", w.head.Epoch))
	if welcome.Recovered == nil || !*welcome.Recovered {
		t.Fatalf("resume welcome %+v", welcome)
	}
	frames := readMsgs(t, ws, 20)
	expectRange(t, positions(frames), 4, 20)
	checkLanes(t, frames)
}
