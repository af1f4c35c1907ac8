package e2e_test

import (
	"fmt"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// firstShown reports an error until v showed n messages.
func firstShown(v *wsviewer.Viewer, n int) error {
	if got := len(v.Shown()); got < n {
		return fmt.Errorf("viewer shown %d messages, want %d", got, n)
	}
	return nil
}

// replayedFirst checks the msgs frames of v's connection conn: the replay
// frames come before any live frame and start right after since.
func replayedFirst(t *testing.T, v *wsviewer.Viewer, conn int, since int64) {
	t.Helper()
	var frames []wsviewer.Frame
	for _, f := range v.Frames() {
		if f.Conn == conn {
			frames = append(frames, f)
		}
	}
	if len(frames) == 0 || !frames[0].Replay || frames[0].First != since+1 {
		t.Errorf("connection %d: first frame %+v, want a replay starting at pos %d", conn, first(frames), since+1)
		return
	}
	live := false
	for _, f := range frames {
		if !f.Replay {
			live = true
		} else if live {
			t.Errorf("connection %d: replay frame %+v after a live frame", conn, f)
		}
	}
}

func first(fs []wsviewer.Frame) any {
	if len(fs) == 0 {
		return "none"
	}
	return fs[0]
}

// resumedOK checks that the second welcome of every viewer answered a
// resume (since and epoch sent) with recovered equal to want.
func resumedOK(t *testing.T, vs []*wsviewer.Viewer, want bool) {
	t.Helper()
	bad := 0
	var example wsviewer.Welcome
	for _, v := range vs {
		ws := v.Welcomes()
		if len(ws) >= 2 && ws[1].Since >= 0 && ws[1].Recovered != nil && *ws[1].Recovered == want {
			continue
		}
		if bad == 0 && len(ws) >= 2 {
			example = ws[1]
		}
		bad++
	}
	if bad > 0 {
		t.Errorf("%d of %d viewers did not resume with recovered:%v; for example %v", bad, len(vs), want, example)
	}
}
