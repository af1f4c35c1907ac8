package e2e_test

import (
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// roomsViewer is one connection holding several rooms. It keeps each
// room's epoch and last position, counts every id it is shown and notes
// every hole in a room's positions.
type roomsViewer struct {
	rooms []string

	mu       sync.Mutex
	epoch    map[string]string
	pos      map[string]int64
	seen     map[string]int // id -> times shown
	problems []string
	welcomes []wsFrame
}

func newRoomsViewer(rooms ...string) *roomsViewer {
	return &roomsViewer{rooms: rooms, epoch: map[string]string{}, pos: map[string]int64{}, seen: map[string]int{}}
}

// url is the /ws URL of comet resuming every room the viewer has a
// position in: since/epoch for the first room, since.ROOM/epoch.ROOM for
// the others.
func (v *roomsViewer) url(comet *stack.Comet) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	q := ""
	for i, r := range v.rooms {
		q += "&room=" + r
		if e := v.epoch[r]; e != "" {
			key := ""
			if i > 0 {
				key = "." + r
			}
			q += "&since" + key + "=" + strconv.FormatInt(v.pos[r], 10) + "&epoch" + key + "=" + url.QueryEscape(e)
		}
	}
	return comet.WS() + "?" + q[1:]
}

// session connects to comet and reads until the connection ends.
func (v *roomsViewer) session(t *testing.T, comet *stack.Comet) {
	ws, _, err := wsviewer.TryDial(v.url(comet), nil)
	if err != nil {
		t.Errorf("dial %s: %v", comet.ID, err)
		return
	}
	defer ws.Close()
	for {
		f, _, err := ws.Next(30 * time.Second)
		if err != nil {
			return
		}
		v.take(flatFrame(f))
	}
}

func (v *roomsViewer) take(f wsFrame) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch f.Op {
	case "welcome":
		v.welcomes = append(v.welcomes, f)
		if f.Recovered == nil || !*f.Recovered || f.Epoch != v.epoch[f.Room] {
			v.epoch[f.Room], v.pos[f.Room] = f.Epoch, f.Pos
		}
	case "msgs":
		if e := v.epoch[f.Room]; e != f.Epoch {
			if e != "" {
				v.problems = append(v.problems, fmt.Sprintf("room %s: epoch %s after %s", f.Room, f.Epoch, e))
			}
			v.epoch[f.Room], v.pos[f.Room] = f.Epoch, 0
		}
		for _, m := range f.Msgs {
			v.seen[m.ID]++
			if f.Replay && m.Pos <= v.pos[f.Room] {
				continue // the history after a fresh join
			}
			if m.Pos != v.pos[f.Room]+1 {
				v.problems = append(v.problems, fmt.Sprintf("room %s: position %d after %d", f.Room, m.Pos, v.pos[f.Room]))
			}
			v.pos[f.Room] = max(v.pos[f.Room], m.Pos)
		}
	}
}

// exactly reports an error until every id of want was shown, and fails
// when one was shown twice, an id not in want was shown, or positions had a
// hole.
func (v *roomsViewer) exactly(want []string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.problems) > 0 {
		return fmt.Errorf("%d problems, first %s", len(v.problems), v.problems[0])
	}
	wanted := map[string]bool{}
	missing := 0
	for _, id := range want {
		wanted[id] = true
		if v.seen[id] == 0 {
			missing++
		}
	}
	for id, n := range v.seen {
		if n > 1 || !wanted[id] {
			return fmt.Errorf("id %s shown %d times (sent: %v)", id, n, wanted[id])
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d missing", missing, len(want))
	}
	return nil
}

// A comet killed (SIGKILL) under a viewer of two rooms while both rooms
// get messages: the viewer comes back on the other comet resuming each
// room from its own position, both resumes are recovered, and it ends with
// every message of both rooms exactly once, each room's positions without
// a hole, and nothing of a third room.
func TestFaultCometKilledSeveralRooms(t *testing.T) {
	s := stack.New(t, stack.Options{})
	a, b, other := testkit.Uniq("multi-a-"), testkit.Uniq("multi-b-"), testkit.Uniq("multi-x-")
	v := newRoomsViewer(a, b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.session(t, s.Comets[0])
	}()
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		if len(v.welcomes) < 2 {
			return fmt.Errorf("%d welcomes", len(v.welcomes))
		}
		return nil
	})
	sa, sb, sx := s.Send(t, a, 600, 150), s.Send(t, b, 600, 150), s.Send(t, other, 100, 50)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.pos[a] < 100 || v.pos[b] < 100 {
			return fmt.Errorf("positions %v", v.pos)
		}
		return nil
	})
	s.Comets[0].Kill()
	<-done
	go v.session(t, s.Comets[1])
	for _, sd := range []*stack.Sender{sa, sb, sx} {
		sd.Wait(t, 30*time.Second)
	}
	want := append(sa.Accepted(), sb.Accepted()...)
	testkit.SucceedsSoon(t, 20*time.Second, func() error { return v.exactly(want) })
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.welcomes) != 4 {
		t.Fatalf("welcomes %+v, want two per connection", v.welcomes)
	}
	for _, w := range v.welcomes[2:] {
		if w.Recovered == nil || !*w.Recovered {
			t.Errorf("resume welcome %+v: want recovered", w)
		}
	}
}
