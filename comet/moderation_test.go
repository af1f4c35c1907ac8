package comet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
	"github.com/danmaku/danmaku/route"
)

// delete writes a del event the way job does (BeginEvent tombstones the
// history) and pushes it to the comets.
func (w *tlRoom) delete(p *push.Client, ids []string, comets ...*Server) {
	w.tb.Helper()
	ctx := context.Background()
	ev := danmaku.Event{Op: danmaku.OpDel, Room: w.id, ID: testkit.Uniq("ev"), IDs: ids}
	b, err := w.store.BeginEvent(ctx, ev, route.EventOptions{Owner: "test", ClaimTTL: 5 * time.Second, LockTTL: 5 * time.Second})
	if err != nil || b.Status != route.Acquired {
		w.tb.Fatalf("begin event: %+v %v", b, err)
	}
	ev.Epoch, ev.Dels = b.Epoch, b.Dels
	body, _ := json.Marshal(ev)
	for _, c := range comets {
		if _, err := p.Push(ctx, c.AdvertiseAddr(), body); err != nil {
			w.tb.Fatalf("push del: %v", err)
		}
	}
	if err := w.store.EndBroadcast(ctx, b.Lock, []string{ev.ID}, time.Minute); err != nil {
		w.tb.Fatal(err)
	}
}

// A del event reaches every viewer of the room as the del frame; after it
// the messages are gone from history on join, from a resume served by the
// ring and from one served by Redis, every resume is recovered (no gap),
// and live messages go on at the next positions.
func TestDeleteEvent(t *testing.T) {
	s, store := mustStart(t, nil)
	other, _ := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws1, _ := joinWelcome(t, s, w.id, "")
	ws2, _ := joinWelcome(t, s, w.id, "")
	mustPush(t, p, s, w.write(10))
	for _, ws := range []*wsviewer.Conn{ws1, ws2} {
		expectRange(t, positions(readMsgs(t, ws, 10)), 1, 10)
	}
	gone := []string{w.id + "-3", w.id + "-7"}
	w.delete(p, gone, s, other)
	for _, ws := range []*wsviewer.Conn{ws1, ws2} {
		if f := mustReadOp(t, ws, danmaku.OpDel); f.Room != w.id || !slices.Equal(f.IDs, gone) {
			t.Fatalf("del frame %+v, want ids %v", f, gone)
		}
	}
	expectValue(t, s.metrics.deletedMsgs, 2, "messages deleted from the ring")
	kept := []int64{4, 5, 6, 8, 9, 10}
	for _, c := range []*Server{s, other} {
		ws, wel := joinWelcome(t, c, w.id, resumeQuery(w.head.Epoch, 3))
		if wel.Recovered == nil || !*wel.Recovered || wel.Pos != 10 {
			t.Fatalf("resume after the delete: welcome %+v, want recovered at 10", wel)
		}
		if got := positions(readMsgs(t, ws, 10)); !slices.Equal(got, kept) {
			t.Fatalf("resume from 3: positions %v, want %v", got, kept)
		}
	}
	ws3, _ := joinWelcome(t, s, w.id, "")
	if got := positions([]frame{mustReadOp(t, ws3, "msgs")}); !slices.Equal(got, []int64{1, 2, 4, 5, 6, 8, 9, 10}) {
		t.Fatalf("history on join: %v", got)
	}
	// A comet that loads the room from Redis after the delete.
	third, _ := mustStart(t, nil)
	ws4, _ := joinWelcome(t, third, w.id, "")
	if got := positions([]frame{mustReadOp(t, ws4, "msgs")}); !slices.Equal(got, []int64{1, 2, 4, 5, 6, 8, 9, 10}) {
		t.Fatalf("history on join from Redis: %v", got)
	}
	mustPush(t, p, s, w.write(1))
	for _, ws := range []*wsviewer.Conn{ws1, ws2, ws3} {
		if f := mustReadOp(t, ws, "msgs"); len(f.Msgs) != 1 || f.Msgs[0].Pos != 11 || f.Replay {
			t.Fatalf("live after the delete: %+v", f)
		}
	}
	// The push counted the deletion the comet applied: nothing to catch up.
	expectNoFrame(t, ws1, 300*time.Millisecond)
}

// The del frame is the wire contract: op, room and ids, nothing else.
func TestDelFrameOnTheWire(t *testing.T) {
	s, store := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws, _ := joinWelcome(t, s, w.id, "")
	mustPush(t, p, s, w.write(2))
	readMsgs(t, ws, 2)
	w.delete(p, []string{w.id + "-1"}, s)
	_, data, err := ws.NextRaw(5 * time.Second)
	if want := fmt.Sprintf(`{"op":"del","room":"%s","ids":["%s-1"]}`, w.id, w.id); err != nil || string(data) != want {
		t.Fatalf("del frame %s %v, want %s", data, err, want)
	}
	// A push body that is no event and no batch is refused.
	if _, err := p.Push(context.Background(), s.AdvertiseAddr(), []byte(`{"op":"del","room":"`+w.id+`","id":"e"}`)); danmaku.ErrorCode(err) != danmaku.EINVALID {
		t.Fatalf("del without ids: %v", err)
	}
}

// expectBanned reads the error frame "banned" and the close 4003.
func expectBanned(tb testing.TB, ws *wsviewer.Conn) {
	tb.Helper()
	if f := mustReadOp(tb, ws, opError); f.Code != codeBanned {
		tb.Fatalf("error frame %+v, want %s", f, codeBanned)
	}
	_, _, err := ws.NextRaw(5 * time.Second)
	if !websocket.IsCloseError(err, CloseBanned) {
		tb.Fatalf("after the error frame: %v, want close %d", err, CloseBanned)
	}
}

// A ban event closes the user's connections to the room with 4003 and no
// others; while the ban lasts the user's joins of the room are refused the
// same way (and not counted online), joins of other rooms are not; after
// the ban they are welcome again.
func TestBanEvent(t *testing.T) {
	s, store := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	room, other := testkit.Uniq("ban"), testkit.Uniq("ban")
	bad, good := testkit.Uniq("u"), testkit.Uniq("u")
	ws1, _ := joinWelcome(t, s, room, "uid="+bad)
	ws2, _ := joinWelcome(t, s, room, "uid="+bad) // a second tab
	ws3, _ := joinWelcome(t, s, room, "uid="+good)
	ws4, _ := joinWelcome(t, s, other, "uid="+bad)
	ctx := context.Background()
	if err := store.Ban(ctx, bad, room, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(danmaku.Event{Op: danmaku.OpBan, Room: room, ID: "ev1", User: bad, Until: time.Now().Add(2 * time.Second).UnixMilli()})
	if n, err := p.Push(ctx, s.AdvertiseAddr(), body); err != nil || n != 2 {
		t.Fatalf("ban push: %d %v, want 2 connections closed", n, err)
	}
	expectBanned(t, ws1)
	expectBanned(t, ws2)
	for _, ws := range []*wsviewer.Conn{ws3, ws4} {
		mustSend(t, ws, map[string]string{"op": "ping"})
		mustReadOp(t, ws, opPong)
	}
	expectRoutes(t, store, s, room, 1)
	// Joins while banned: by URL, and by a join frame from another room.
	ws5 := mustDial(t, s, "room="+room+"&uid="+bad)
	expectBanned(t, ws5)
	mustSend(t, ws4, map[string]string{"op": "join", "room": room})
	expectBanned(t, ws4)
	expectRoutes(t, store, s, room, 1)
	if n, _ := store.Online(ctx, other); n != 0 {
		t.Fatalf("the viewer that switched into the ban is still online in %s", other)
	}
	if v := value(t, s.metrics.rejectedConns.WithLabelValues("banned")); v != 4 {
		t.Fatalf("banned connections counted %v, want 4", v)
	}
	if v := value(t, s.metrics.registryErrors); v != 0 {
		t.Fatalf("refused joins counted as %v registry errors", v)
	}
	// Welcome again after the duration.
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		ws, _, err := wsviewer.TryDial(wsURL(s, "room="+room+"&uid="+bad), nil)
		if err != nil {
			return err
		}
		defer ws.Close()
		if f, data, err := ws.Next(5 * time.Second); err != nil || f.Op != opWelcome {
			return fmt.Errorf("join after the ban: %s %v", data, err)
		}
		return nil
	})
}

// A comet that missed a del event (job left it out) catches up from the
// room's deletion log: at the next push, which counts the deletions of the
// epoch, or, in a quiet room, at the gap check's read of the head. Its
// viewers get the del frame and its ring forgets the message.
func TestMissedDeleteCaughtUp(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck = 0 }) // pushes only
	quiet, _ := mustStart(t, func(c *Config) { c.GapCheck = 100 * time.Millisecond })
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	ws, _ := joinWelcome(t, s, w.id, "")
	wq, _ := joinWelcome(t, quiet, w.id, "")
	b := w.write(4)
	mustPush(t, p, s, b)
	mustPush(t, p, quiet, b)
	readMsgs(t, ws, 4)
	readMsgs(t, wq, 4)
	w.delete(p, []string{w.id + "-2"}) // pushed to nobody

	// No push comes: the quiet comet's gap check reads the head, which
	// has no new position but one more deletion.
	if f := mustReadOp(t, wq, danmaku.OpDel); !slices.Equal(f.IDs, []string{w.id + "-2"}) {
		t.Fatalf("del frame on the quiet comet: %+v", f)
	}

	// The next push says one id was deleted: s reads the log.
	mustPush(t, p, s, w.write(1))
	if f := mustReadOp(t, ws, "msgs"); f.Msgs[0].Pos != 5 {
		t.Fatalf("live frame %+v", f)
	}
	if f := mustReadOp(t, ws, danmaku.OpDel); !slices.Equal(f.IDs, []string{w.id + "-2"}) {
		t.Fatalf("del frame after the push: %+v", f)
	}
	expectValue(t, s.metrics.repairedMsgs.WithLabelValues(repairDels), 1, "deletions caught up")
	ws2, _ := joinWelcome(t, s, w.id, resumeQuery(w.head.Epoch, 1))
	if got := positions(readMsgs(t, ws2, 5)); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Fatalf("resume after the caught-up delete: %v", got)
	}
	r := quiet.hub.room(w.id)
	r.mu.Lock()
	kept := r.tl.Holds(w.id + "-2")
	dels := r.tl.Dels
	r.mu.Unlock()
	if kept || dels != 1 {
		t.Fatalf("the quiet comet's ring still holds the deleted id (%v) or counts %d deletions", kept, dels)
	}
}

// A ban takes one room away from a connection that holds others: an error
// frame "banned" names the room, the connection stays in its other rooms.
// A sub of the room is refused the same way while the ban lasts; a ban of
// the connection's last room closes it with 4003.
func TestBanOneOfSeveralRooms(t *testing.T) {
	s, store := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	a, b := testkit.Uniq("ban"), testkit.Uniq("ban")
	user := testkit.Uniq("u")
	ws := mustDial(t, s, "room="+a+"&room="+b+"&uid="+user)
	mustReadOp(t, ws, opWelcome)
	mustReadOp(t, ws, opWelcome)
	ctx := context.Background()
	ban := func(room string) {
		t.Helper()
		if err := store.Ban(ctx, user, room, time.Minute); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(danmaku.Event{Op: danmaku.OpBan, Room: room, ID: testkit.Uniq("ev"), User: user, Until: time.Now().Add(time.Minute).UnixMilli()})
		if n, err := p.Push(ctx, s.AdvertiseAddr(), body); err != nil || n != 1 {
			t.Fatalf("ban push: %d %v", n, err)
		}
	}
	ban(a)
	if f := mustReadOp(t, ws, opError); f.Code != codeBanned || f.Room != a {
		t.Fatalf("error frame %+v, want %s for %s", f, codeBanned, a)
	}
	mustSend(t, ws, map[string]string{"op": "ping"})
	mustReadOp(t, ws, opPong)
	expectRoutes(t, store, s, a, 0)
	expectRoutes(t, store, s, b, 1)
	if n := mustPush(t, p, s, batch(a, testkit.Uniq("m"))); n != 0 {
		t.Fatalf("push to the banned room reached %d", n)
	}
	mustSend(t, ws, map[string]string{"op": "sub", "room": a})
	if f := mustReadOp(t, ws, opError); f.Code != codeBanned || f.Room != a {
		t.Fatalf("sub while banned: %+v", f)
	}
	expectRoutes(t, store, s, a, 0)
	if n := mustPush(t, p, s, batch(b, "still")); n != 1 {
		t.Fatalf("push to the other room reached %d", n)
	}
	if f := mustReadOp(t, ws, danmaku.OpMsgs); f.Room != b {
		t.Fatalf("frame %+v", f)
	}
	ban(b)
	if f := mustReadOp(t, ws, opError); f.Code != codeBanned || f.Room != b {
		t.Fatalf("error frame %+v", f)
	}
	if _, _, err := ws.NextRaw(5 * time.Second); !websocket.IsCloseError(err, CloseBanned) {
		t.Fatalf("after the last room's ban: %v, want close %d", err, CloseBanned)
	}
	expectRoutes(t, store, s, b, 0)
}
