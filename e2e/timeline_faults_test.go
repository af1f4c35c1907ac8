package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// A viewer that loses its connection for 3 s and resumes with since gets
// exactly the messages it missed, replayed before any live frame, then
// the live ones: no gap, no duplicate, recovered:true. A viewer that
// stayed connected is the control.
func TestFaultResumeAfterDisconnect(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1})
	room := testkit.Uniq("resume-")
	gone := s.Viewer(t, room, s.Comets[0])
	stay := s.Viewer(t, room, s.Comets[0])
	send := s.Send(t, room, 600, 100)
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return firstShown(gone, 50) })
	gone.Drop()
	time.Sleep(3 * time.Second) // the outage the viewer resumes from
	_, since := gone.Position()
	gone.Resume(t)
	send.Wait(t, 30*time.Second)
	wsviewer.DeliveredOnce(t, 10*time.Second, send.Accepted(), gone, stay)
	wsviewer.NoGaps(t, gone, stay)
	w := gone.Welcomes()[1]
	if w.Since != since || w.Recovered == nil || !*w.Recovered {
		t.Errorf("resume welcome %+v after since=%d: want recovered:true", w, since)
	}
	replayedFirst(t, gone, 2, since)
}

// A comet killed (SIGKILL) in the middle of 2,000 messages: its viewers
// resume on the other comet, and every viewer of both ends with every
// message exactly once, in position order.
func TestFaultCometKilled(t *testing.T) {
	s := stack.New(t, stack.Options{})
	room := testkit.Uniq("killed-")
	var victims, others []*wsviewer.Viewer
	for i := 0; i < 10; i++ {
		victims = append(victims, s.Viewer(t, room, s.Comets[0], s.Comets[1]))
		others = append(others, s.Viewer(t, room, s.Comets[1]))
	}
	send := s.Send(t, room, 2000, 400)
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return firstShown(victims[0], 500) })
	s.Comets[0].Kill()
	send.Wait(t, 30*time.Second)
	all := append(victims, others...)
	wsviewer.DeliveredOnce(t, 10*time.Second, send.Accepted(), all...)
	wsviewer.NoGaps(t, all...)
	resumedOK(t, victims, true)
}

// A comet stalled for 3 s (SIGSTOP) while job's pushes to it time out
// and job leaves it out: its viewers, never disconnected, end with every
// message exactly once; the comet repairs the gap from the room's history.
// The lease outlives the stall, so this is the timeline's repair alone.
func TestFaultCometStalled(t *testing.T) {
	s := stack.New(t, stack.Options{Comet: []string{"-comet.lease_ttl", "20s"}})
	room := testkit.Uniq("stalled-")
	var stalled, others []*wsviewer.Viewer
	for i := 0; i < 10; i++ {
		stalled = append(stalled, s.Viewer(t, room, s.Comets[0]))
		others = append(others, s.Viewer(t, room, s.Comets[1]))
	}
	send := s.Send(t, room, 1800, 300)
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return firstShown(stalled[0], 200) })
	s.Comets[0].Pause(t)
	time.Sleep(3 * time.Second) // the stall
	s.Comets[0].Continue(t)
	send.Wait(t, 30*time.Second)
	if !s.Jobs[0].Logged("comet failed; left out for a while") {
		t.Error("job never left the stalled comet out: the stall did not test what it should")
	}
	all := append(stalled, others...)
	wsviewer.DeliveredOnce(t, 10*time.Second, send.Accepted(), all...)
	wsviewer.NoGaps(t, all...)
	for i, v := range stalled {
		if n := v.Conns(); n != 1 {
			t.Errorf("viewer %d of the stalled comet connected %d times; it must never be cut", i, n)
		}
	}
}

// Redis emptied (FLUSHALL) mid-stream: the room's epoch changes and the
// viewers that stayed connected follow it, showing every message accepted
// after Redis was emptied (the comets repair from the new epoch's start).
// Viewers that were away and resume with the lost epoch get
// recovered:false, the new epoch, and every message accepted after.
func TestFaultRedisEmptied(t *testing.T) {
	s := stack.New(t, stack.Options{})
	room := testkit.Uniq("emptied-")
	var stay, resumers []*wsviewer.Viewer
	for i := 0; i < 4; i++ {
		stay = append(stay, s.Viewer(t, room, s.Comets[i%2]))
	}
	for i := 0; i < 2; i++ {
		resumers = append(resumers, s.Viewer(t, room, s.Comets[i%2]))
	}
	send := s.Send(t, room, 2400, 300)
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return firstShown(resumers[0], 200) })
	for _, v := range resumers {
		v.Drop()
	}
	oldEpoch, _ := resumers[0].Position()
	if err := s.RDB().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// The resumers come back once the comets follow the new epoch (on a
	// server that never does, the wait runs out and the checks below fail).
	testkit.Soon(10*time.Second, func() error {
		for i, v := range stay {
			if e, _ := v.Position(); e == "" || e == oldEpoch {
				return fmt.Errorf("viewer %d holds epoch %q", i, e)
			}
		}
		return nil
	})
	for _, v := range resumers {
		v.Resume(t)
	}
	resumed := time.Now()
	send.Wait(t, 30*time.Second)
	within := stack.LeaseRenew + stack.Window + 5*time.Second
	wsviewer.Delivered(t, within, send.AcceptedAfter(back), stay...)
	wsviewer.Delivered(t, within, send.AcceptedAfter(resumed), resumers...)
	resumedOK(t, resumers, false)
	for i, v := range resumers {
		if w := v.Welcomes()[1]; w.Epoch == "" || w.Epoch == oldEpoch {
			t.Errorf("resumer %d: welcome %v after the epoch %q was lost: want a new epoch", i, w, oldEpoch)
		}
	}
	for i, v := range stay {
		if e, _ := v.Position(); e == "" || e == oldEpoch {
			t.Errorf("viewer %d holds epoch %q after Redis was emptied (was %q)", i, e, oldEpoch)
		}
	}
}

// A new viewer of a room gets the room's last 20 messages right after its
// welcome, in one replay frame, with their positions.
func TestFaultHistoryOnJoin(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1, CometEnv: []string{"DANMAKU_COMET_HISTORY_ON_JOIN=20"}})
	room := testkit.Uniq("history-")
	early := s.Viewer(t, room, s.Comets[0])
	send := s.Send(t, room, 30, 100)
	send.Wait(t, 10*time.Second)
	ids := send.Accepted()
	wsviewer.DeliveredOnce(t, 10*time.Second, ids, early)
	late := s.Viewer(t, room, s.Comets[0])
	if err := testkit.Soon(5*time.Second, func() error { return firstShown(late, 20) }); err != nil {
		t.Fatalf("the new viewer got no history: %v; frames %+v", err, late.Frames())
	}
	w, fs, shown := late.Welcomes()[0], late.Frames(), late.Shown()
	if f := fs[0]; !f.Replay || f.N != 20 || f.Epoch == "" || f.Epoch != w.Epoch {
		t.Errorf("first frame %+v after welcome %+v: want one replay frame of 20 messages of the welcome's epoch", f, w)
	}
	if w.Pos != 30 {
		t.Errorf("welcome pos %d, want 30", w.Pos)
	}
	for i, m := range shown[:20] {
		if m.ID != ids[10+i] || m.Pos != int64(11+i) || !m.Replay {
			t.Errorf("history message %d: %+v, want id %s at pos %d, replayed", i, m, ids[10+i], 11+i)
		}
	}
}

// The seam between replay and live frames: 200 viewers drop and resume
// (each on the other comet) while 500 messages a second flow; every
// viewer shows every message exactly once, in position order.
func TestFaultResumeSeam(t *testing.T) {
	s := stack.New(t, stack.Options{})
	room := testkit.Uniq("seam-")
	var vs []*wsviewer.Viewer
	for i := 0; i < 200; i++ {
		vs = append(vs, s.Viewer(t, room, s.Comets[i%2], s.Comets[(i+1)%2]))
	}
	send := s.Send(t, room, 2000, 500)
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		for _, v := range vs {
			if err := firstShown(v, 300); err != nil {
				return err
			}
		}
		return nil
	})
	for _, v := range vs {
		v.Drop()
	}
	time.Sleep(300 * time.Millisecond) // messages flow while they are away
	for _, v := range vs {
		v.ResumeAsync()
		time.Sleep(2 * time.Millisecond) // 200 resumes over about half a second
	}
	for _, v := range vs {
		v.WaitWelcomes(t, 2, 15*time.Second)
	}
	send.Wait(t, 30*time.Second)
	wsviewer.DeliveredOnce(t, 15*time.Second, send.Accepted(), vs...)
	wsviewer.NoGaps(t, vs...)
	resumedOK(t, vs, true)
}
