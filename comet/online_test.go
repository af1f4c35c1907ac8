package comet

import (
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// Online frames are per room: a viewer in two rooms gets each room's own
// count, and a count changes when a viewer of that room leaves it.
func TestOnlinePerRoom(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) { c.OnlinePeriod = 64 * time.Millisecond })
	a, b := testkit.Uniq("on"), testkit.Uniq("on")
	x := mustDial(t, s, "room="+a+"&room="+b)
	mustReadOp(t, x, opWelcome)
	mustReadOp(t, x, opWelcome)
	y := mustDial(t, s, "room="+b)
	if f := mustReadOp(t, y, opWelcome); f.Online != 2 {
		t.Fatalf("welcome %+v, want 2 online", f)
	}
	expectOnlineFrames(t, x, map[string]int64{b: 2})
	mustSend(t, y, map[string]string{"op": "unsub", "room": b})
	expectOnlineFrames(t, x, map[string]int64{b: 1})
}

// expectOnlineFrames reads frames from ws until the last online frame of each
// room of want says its count.
func expectOnlineFrames(tb testing.TB, ws *wsviewer.Conn, want map[string]int64) {
	tb.Helper()
	got := map[string]int64{}
	deadline := time.Now().Add(5 * time.Second)
	for {
		match := true
		for room, n := range want {
			match = match && got[room] == n
		}
		if match {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("online counts %v, want %v", got, want)
		}
		if f := mustRead(tb, ws); f.Op == opOnline {
			got[f.Room] = f.Online
		}
	}
}
