package wsviewer

import (
	"strings"
	"testing"
	"time"
)

// A failed delivery names where the missing ids were and what the viewer
// received: live frames in sequence are merged, replays and a new
// connection start a new entry.
func TestStory(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	other := &Viewer{shown: []Shown{{ID: "a", Epoch: "e1", Pos: 4}, {ID: "b", Epoch: "e1", Pos: 5}}}
	v := &Viewer{
		welcomes: []Welcome{{Conn: 1, Since: -1, Epoch: "e1", Pos: 3, At: at}},
		frames: []Frame{
			{Conn: 1, Replay: true, Epoch: "e1", N: 3, First: 1, Last: 3},
			{Conn: 1, Epoch: "e1", N: 1, First: 5, Last: 5},
			{Conn: 1, Epoch: "e1", N: 2, First: 6, Last: 7},
			{Conn: 2, Epoch: "e1", N: 1, First: 8, Last: 8},
		},
	}
	got := v.story([]string{"a", "z"}, positions([]*Viewer{other, v}))
	for _, want := range []string{
		"missing at e1/4 unknown (no viewer showed it)",
		`welcome{conn 1, since -1, epoch "e1", pos 3, recovered absent, } at 03:04:05.000`,
		"frames: [conn 1 replay e1 1-3 ×1] [conn 1 live e1 5-7 ×2] [conn 2 live e1 8-8 ×1]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("story lacks %q:\n%s", want, got)
		}
	}
}
