package job_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// eventRecord is ev as logic writes it to the room's partition.
func (e *env) eventRecord(ev danmaku.Event) kafka.Message {
	e.t.Helper()
	v, err := danmaku.MarshalEvent(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return kafka.Message{Key: []byte(ev.Room), Value: v}
}

func msgRecord(t *testing.T, room, id string) kafka.Message {
	v, err := danmaku.MarshalEnvelope(room, danmaku.Message{ID: id, UID: 1, Name: "n", Content: "c " + id, TS: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	return kafka.Message{Key: []byte(room), Value: v}
}

// arrived lists every message id and every deleted id ("del:" + id) in
// the order the frames came.
func (v *viewer) arrived() []string {
	var out []string
	for _, a := range v.Arrivals() {
		if a.Deleted != "" {
			out = append(out, "del:"+a.Deleted)
		} else {
			out = append(out, a.Msg.ID)
		}
	}
	return out
}

// A del event written right behind the message it deletes (still waiting
// for its room's window) goes out after it, to every comet of the room,
// and before the messages written after it; the history keeps the deleted
// message's position as a tombstone; the same event again (a redelivery)
// is skipped as a duplicate.
func TestDelEventInOrder(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	cfg := jobConfig()
	cfg.Window = 300 * time.Millisecond
	j := e.startJob(cfg, nil)
	del := danmaku.Event{Op: danmaku.OpDel, Room: room, ID: testkit.Uniq("ev"), IDs: []string{"m2"}}
	e.write(msgRecord(t, room, "m1"), msgRecord(t, room, "m2"), msgRecord(t, room, "m3"),
		e.eventRecord(del), msgRecord(t, room, "m4"), e.eventRecord(del))
	want := []string{"m1", "m2", "m3", "del:m2", "m4"}
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		for _, v := range viewers {
			if got := v.arrived(); !slices.Equal(got, want) {
				return fmt.Errorf("arrivals %v, want %v", got, want)
			}
		}
		return nil
	})
	h, err := e.store.History(context.Background(), room, 0, 10)
	if err != nil || len(h.Msgs) != 4 || !h.Msgs[1].Deleted || h.Msgs[1].ID != "m2" || h.Msgs[1].Pos != 2 || h.Msgs[3].ID != "m4" {
		t.Fatalf("history %+v %v", h, err)
	}
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if d, dup := counter(t, j.reg, "danmaku_job_events_total", "result", "delivered"),
			counter(t, j.reg, "danmaku_job_events_total", "result", "duplicate"); d != 1 || dup != 1 {
			return fmt.Errorf("events delivered %v, duplicate %v; want 1 and 1", d, dup)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	if got := viewers[0].arrived(); !slices.Equal(got, want) {
		t.Fatalf("after the duplicate: %v", got)
	}
}

// A ban event closes the banned user's connection to the room with 4003
// on whichever comet holds it.
func TestBanEventClosesConnections(t *testing.T) {
	e := newEnv(t, 2)
	room := testkit.Uniq("room")
	var conns []*wsviewer.Conn
	for _, c := range e.comets {
		conns = append(conns, wsviewer.DialConn(t, "ws://"+c.PublicAddr()+"/ws?room="+room+"&uid=77", nil))
	}
	other := e.viewer(e.comets[0], room)
	e.waitOnline(room, 3)
	if err := e.store.Ban(context.Background(), "77", room, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.startJob(jobConfig(), nil)
	e.write(e.eventRecord(danmaku.Event{Op: danmaku.OpBan, Room: room, ID: testkit.Uniq("ev"), User: "77",
		Until: time.Now().Add(time.Minute).UnixMilli()}))
	for _, ws := range conns {
		ws.ExpectClose(t, 4003, 20*time.Second)
	}
	e.waitOnline(room, 1)
	ids := e.send(room, 5, "still here")
	waitAll(t, 10*time.Second, []*viewer{other}, map[string][]string{room: ids})
}

// An event is committed only once it was pushed: a job that could not
// push it (the room's only comet hangs) and crashed leaves it to the next
// member of the group, which delivers it.
func TestEventSurvivesACrash(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("room")
	_, accepted := e.hungComet(room)
	cfg := jobConfig()
	a := e.startJob(cfg, nil)
	e.write(e.eventRecord(danmaku.Event{Op: danmaku.OpDel, Room: room, ID: testkit.Uniq("ev"), IDs: []string{"x1"}}))
	select {
	case <-accepted:
	case <-time.After(20 * time.Second):
		t.Fatal("the event was never pushed")
	}
	a.Crash()
	<-a.Done()
	v := e.viewer(e.comets[0], room)
	e.waitOnline(room, 2)
	b := e.startJob(cfg, nil)
	testkit.SucceedsSoon(t, 30*time.Second, func() error {
		if got := v.arrived(); !slices.Equal(got, []string{"del:x1"}) {
			return fmt.Errorf("arrivals %v", got)
		}
		return nil
	})
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if n := counter(t, b.reg, "danmaku_job_events_total", "op", "del", "result", "delivered"); n != 1 {
			return fmt.Errorf("delivered by the second job: %v", n)
		}
		return nil
	})
}

// Stream events are the archive's: job neither delivers nor counts them as
// invalid, the messages around them go out in order, and their offsets
// are committed.
func TestStreamEventsSkipped(t *testing.T) {
	e := newEnv(t, 1)
	room := testkit.Uniq("room")
	v := e.viewer(e.comets[0], room)
	e.waitOnline(room, 1)
	j := e.startJob(jobConfig(), nil)
	now := time.Now().UnixMilli()
	e.write(msgRecord(t, room, "m1"),
		e.eventRecord(danmaku.Event{Op: danmaku.OpStreamStart, Room: room, ID: testkit.Uniq("ev"), Stream: "s1", At: now}),
		msgRecord(t, room, "m2"),
		e.eventRecord(danmaku.Event{Op: danmaku.OpStreamEnd, Room: room, ID: testkit.Uniq("ev"), At: now}),
		msgRecord(t, room, "m3"))
	want := []string{"m1", "m2", "m3"}
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if got := v.arrived(); !slices.Equal(got, want) {
			return fmt.Errorf("arrivals %v, want %v", got, want)
		}
		if n, err := e.committed(); err != nil || n != 5 {
			return fmt.Errorf("committed %d, %v; want 5", n, err)
		}
		return nil
	})
	if n := counter(t, j.reg, "danmaku_job_invalid_total"); n != 0 {
		t.Errorf("invalid records %v, want 0", n)
	}
	for _, op := range []string{danmaku.OpStreamStart, danmaku.OpStreamEnd} {
		for _, result := range []string{"delivered", "duplicate"} {
			if n := counter(t, j.reg, "danmaku_job_events_total", "op", op, "result", result); n != 0 {
				t.Errorf("%s events %s: %v, want none", op, result, n)
			}
		}
	}
	if n := counter(t, j.reg, "danmaku_job_retries_total", "reason", "push"); n != 0 {
		t.Errorf("push retries %v: a stream event went to a comet", n)
	}
}
