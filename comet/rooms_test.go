package comet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// readRooms reads frames from ws until every room of until has a msgs
// frame carrying its position, and returns the positions each room got, in
// order. A msgs frame of a room not in until, or a frame about no room
// (other than pong), fails the test.
func readRooms(tb testing.TB, ws *wsviewer.Conn, until map[string]int64) map[string][]int64 {
	tb.Helper()
	got, _ := readRoomsWelcomes(tb, ws, until)
	return got
}

// readRoomsWelcomes is readRooms that also returns the welcome frames read,
// by room.
func readRoomsWelcomes(tb testing.TB, ws *wsviewer.Conn, until map[string]int64) (map[string][]int64, map[string]frame) {
	tb.Helper()
	got, welcomes := map[string][]int64{}, map[string]frame{}
	done := func() bool {
		for room, last := range until {
			if p := got[room]; len(p) == 0 || p[len(p)-1] < last {
				return false
			}
		}
		return true
	}
	for !done() {
		f := mustRead(tb, ws)
		if f.Room == "" && f.Op != opPong {
			tb.Fatalf("frame names no room: %+v", f)
		}
		if f.Op == opWelcome {
			welcomes[f.Room] = f
		}
		if f.Op != danmaku.OpMsgs {
			continue
		}
		if _, ok := until[f.Room]; !ok {
			tb.Fatalf("msgs frame of room %s, want only %v", f.Room, until)
		}
		for _, m := range f.Msgs {
			got[f.Room] = append(got[f.Room], m.Pos)
		}
	}
	return got, welcomes
}

// expectRooms checks that every room of want got exactly positions
// want[room][0] .. want[room][1].
func expectRooms(tb testing.TB, got map[string][]int64, want map[string][2]int64) {
	tb.Helper()
	for room, r := range want {
		if err := checkRange(got[room], r[0], r[1]); err != nil {
			tb.Fatalf("room %s: %v", room, err)
		}
	}
}

// expectMembers checks room:connections:{room} over all comets.
func expectMembers(tb testing.TB, rdb redis.UniversalClient, room string, want ...string) {
	tb.Helper()
	testkit.SucceedsSoon(tb, 5*time.Second, func() error {
		got, err := rdb.SMembers(context.Background(), "room:connections:{"+room+"}").Result()
		if err != nil {
			return err
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return fmt.Errorf("room %s: members %v, want %v", room, got, want)
		}
		return nil
	})
}

// One socket in several rooms gets exactly its rooms' messages, each room
// in order, each once; every frame names its room. Each room is a
// registration of its own (the connection id, then id.1, id.2, ...),
// counted online in its room. unsub stops a room at once; join leaves
// every room for its own.
func TestSeveralRoomsOneSocket(t *testing.T) {
	s, store := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	a, b, c, d := newTLRoom(t, store), newTLRoom(t, store), newTLRoom(t, store), newTLRoom(t, store)
	user := testkit.Uniq("u")

	ws := mustDial(t, s, "room="+a.id+"&room="+b.id+"&room="+a.id+"&uid="+user)
	wa, wb := mustReadOp(t, ws, opWelcome), mustReadOp(t, ws, opWelcome)
	mustSend(t, ws, map[string]string{"op": "sub", "room": c.id})
	wc := mustReadOp(t, ws, opWelcome)
	if wa.Room != a.id || wb.Room != b.id || wc.Room != c.id || wa.ConnID != wb.ConnID || wb.ConnID != wc.ConnID {
		t.Fatalf("welcomes %+v %+v %+v", wa, wb, wc)
	}
	other, _ := joinWelcome(t, s, d.id, "")
	for range 3 {
		for _, w := range []*tlRoom{a, b, c, d} {
			mustPush(t, p, s, w.write(2))
		}
	}
	expectRooms(t, readRooms(t, ws, map[string]int64{a.id: 6, b.id: 6, c.id: 6}),
		map[string][2]int64{a.id: {1, 6}, b.id: {1, 6}, c.id: {1, 6}})
	expectRooms(t, readRooms(t, other, map[string]int64{d.id: 6}), map[string][2]int64{d.id: {1, 6}})

	id := wa.ConnID
	rdb := redisserver.Client(t)
	expectMembers(t, rdb, a.id, id)
	expectMembers(t, rdb, b.id, id+".1")
	expectMembers(t, rdb, c.id, id+".2")
	for _, w := range []*tlRoom{a, b, c, d} {
		expectRoutes(t, store, s, w.id, 1)
	}
	if n, err := rdb.HLen(context.Background(), "user:online:{"+user+"}").Result(); err != nil || n != 3 {
		t.Fatalf("user:online lists %d registrations (%v), want 3", n, err)
	}

	// unsub: confirmed, the room's count drops, its pushes stop.
	mustSend(t, ws, map[string]string{"op": "unsub", "room": b.id})
	if f := mustReadOp(t, ws, opUnsubscribed); f.Room != b.id {
		t.Fatalf("unsubscribed frame %+v", f)
	}
	expectRoutes(t, store, s, b.id, 0)
	if n := mustPush(t, p, s, b.write(1)); n != 0 {
		t.Fatalf("push to the room left reached %d viewers", n)
	}
	mustPush(t, p, s, a.write(1))
	expectRooms(t, readRooms(t, ws, map[string]int64{a.id: 7}), map[string][2]int64{a.id: {7, 7}})
	// An unsub of a room the connection does not hold is confirmed too.
	mustSend(t, ws, map[string]string{"op": "unsub", "room": b.id})
	mustReadOp(t, ws, opUnsubscribed)

	// join switches: every other room is left.
	mustSend(t, ws, map[string]string{"op": "join", "room": d.id})
	if f := mustReadOp(t, ws, opWelcome); f.Room != d.id || f.Online != 2 {
		t.Fatalf("welcome after join %+v", f)
	}
	expectRooms(t, readRooms(t, ws, map[string]int64{d.id: 6}), map[string][2]int64{d.id: {1, 6}}) // history on join
	for _, w := range []*tlRoom{a, c} {
		expectRoutes(t, store, s, w.id, 0)
		if n := mustPush(t, p, s, w.write(1)); n != 0 {
			t.Fatalf("push to %s after the switch reached %d viewers", w.id, n)
		}
	}
	mustPush(t, p, s, d.write(1))
	expectRooms(t, readRooms(t, ws, map[string]int64{d.id: 7}), map[string][2]int64{d.id: {7, 7}})
	expectMembers(t, rdb, d.id, id+".3", mustConnID(t, s, d.id, id))
	if got := s.hub.local(d.id); got != 2 {
		t.Fatalf("local viewers of %s = %d, want 2", d.id, got)
	}

	ws.Close()
	other.Close()
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if rooms, conns := s.hub.counts(); rooms != 0 || conns != 0 {
			return fmt.Errorf("hub holds %d rooms, %d connections", rooms, conns)
		}
		if n, err := rdb.HLen(context.Background(), "comet:connections:{"+s.ID()+"}").Result(); err != nil || n != 0 {
			return fmt.Errorf("comet index lists %d registrations (%v)", n, err)
		}
		return nil
	})
}

// mustConnID returns the registration of room that is not mine.
func mustConnID(tb testing.TB, s *Server, room, mine string) string {
	tb.Helper()
	ids, err := redisserver.Client(tb).SMembers(context.Background(), "room:connections:{"+room+"}").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, mine) {
			return id
		}
	}
	tb.Fatalf("room %s: no other member in %v", room, ids)
	return ""
}

// A connection holds at most max_rooms_per_conn rooms: a sub beyond it
// (or a room of the URL beyond it) gets the error frame too_many_rooms
// naming the room, and the connection keeps its rooms.
func TestRoomLimit(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.MaxRoomsPerConn = 2 })
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	a, b, c := testkit.Uniq("lim"), testkit.Uniq("lim"), testkit.Uniq("lim")

	ws := mustDial(t, s, "room="+a+"&room="+b+"&room="+c)
	mustReadOp(t, ws, opWelcome)
	mustReadOp(t, ws, opWelcome)
	if f := mustReadOp(t, ws, opError); f.Code != codeTooMany || f.Room != c {
		t.Fatalf("third room of the URL: %+v, want %s for %s", f, codeTooMany, c)
	}
	mustSend(t, ws, map[string]string{"op": "sub", "room": c})
	if f := mustReadOp(t, ws, opError); f.Code != codeTooMany || f.Room != c || !strings.Contains(f.Message, "2 rooms") {
		t.Fatalf("sub beyond the limit: %+v", f)
	}
	// A room held already is answered with a welcome only.
	mustSend(t, ws, map[string]string{"op": "sub", "room": a})
	if f := mustReadOp(t, ws, opWelcome); f.Room != a || f.Online != 1 {
		t.Fatalf("welcome of a room held %+v", f)
	}
	mustSend(t, ws, map[string]string{"op": "ping"})
	mustReadOp(t, ws, opPong)
	expectRoutes(t, store, s, c, 0)
	for _, room := range []string{a, b} {
		if n := mustPush(t, p, s, batch(room, testkit.Uniq("m"))); n != 1 {
			t.Fatalf("push to %s reached %d", room, n)
		}
		if f := mustReadOp(t, ws, danmaku.OpMsgs); f.Room != room {
			t.Fatalf("frame %+v, want room %s", f, room)
		}
	}
	// Room for one more after an unsub.
	mustSend(t, ws, map[string]string{"op": "unsub", "room": a})
	mustReadOp(t, ws, opUnsubscribed)
	mustSend(t, ws, map[string]string{"op": "sub", "room": c})
	if f := mustReadOp(t, ws, opWelcome); f.Room != c {
		t.Fatalf("welcome %+v", f)
	}
	expectRoutes(t, store, s, a, 0)
	expectRoutes(t, store, s, b, 1)
	expectRoutes(t, store, s, c, 1)
	if v := value(t, s.metrics.rejectedConns.WithLabelValues("too_many_rooms")); v != 2 {
		t.Fatalf("too_many_rooms counted %v, want 2", v)
	}
	cfg := DefaultConfig()
	for _, n := range []int{0, maxRoomsPerConn + 1} {
		cfg.MaxRoomsPerConn = n
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "max_rooms_per_conn") {
			t.Errorf("max_rooms_per_conn %d: %v", n, err)
		}
	}
}

// Each room of a connection resumes on its own: after a reconnect with
// since/epoch per room (the URL's since.ROOM/epoch.ROOM, or a sub frame
// with since and epoch) each welcome says recovered, each replay holds
// exactly what that room missed, and live frames follow without a gap or
// a duplicate.
func TestSeveralRoomsResume(t *testing.T) {
	s, store := mustStart(t, nil)
	other, _ := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	a, b := newTLRoom(t, store), newTLRoom(t, store)
	ws := mustDial(t, s, "room="+a.id)
	mustReadOp(t, ws, opWelcome)
	mustSend(t, ws, map[string]string{"op": "sub", "room": b.id})
	mustReadOp(t, ws, opWelcome)
	mustPush(t, p, s, a.write(5))
	mustPush(t, p, s, b.write(3))
	expectRooms(t, readRooms(t, ws, map[string]int64{a.id: 5, b.id: 3}), map[string][2]int64{a.id: {1, 5}, b.id: {1, 3}})
	ws.Close()
	mustPush(t, p, s, a.write(4))
	mustPush(t, p, s, b.write(6))

	// Both rooms resume on this comet (the URL's keyed form), and on one
	// that never held them (it reads Redis; the second room in a sub frame).
	q := "room=" + a.id + "&" + resumeQuery(a.head.Epoch, 5) +
		"&room=" + b.id + "&since." + b.id + "=3&epoch." + b.id + "=" + b.head.Epoch
	ws1 := mustDial(t, s, q)
	ws2 := mustDial(t, other, "room="+a.id+"&since."+a.id+"=5&epoch."+a.id+"="+a.head.Epoch)
	mustSend(t, ws2, map[string]any{"op": "sub", "room": b.id, "since": 3, "epoch": b.head.Epoch})
	for _, ws := range []*wsviewer.Conn{ws1, ws2} {
		got, welcomes := readRoomsWelcomes(t, ws, map[string]int64{a.id: 9, b.id: 9})
		expectRooms(t, got, map[string][2]int64{a.id: {6, 9}, b.id: {4, 9}})
		for _, w := range []*tlRoom{a, b} {
			f := welcomes[w.id]
			if f.Recovered == nil || !*f.Recovered || f.Epoch != w.head.Epoch || f.Pos != 9 {
				t.Fatalf("welcome %+v, want recovered at 9", f)
			}
		}
	}
	ba, bb := a.write(2), b.write(2)
	for _, x := range []*Server{s, other} {
		mustPush(t, p, x, ba)
		mustPush(t, p, x, bb)
	}
	for _, ws := range []*wsviewer.Conn{ws1, ws2} {
		expectRooms(t, readRooms(t, ws, map[string]int64{a.id: 11, b.id: 11}), map[string][2]int64{a.id: {10, 11}, b.id: {10, 11}})
	}
	expectValue(t, s.metrics.resumes.WithLabelValues("recovered"), 2, "recovered resumes")
	expectValue(t, other.metrics.resumes.WithLabelValues("recovered"), 2, "recovered resumes on the other comet")
	expectValue(t, other.metrics.replays.WithLabelValues("redis"), 2, "replays read from Redis on the other comet")
}

// A slow viewer in two rooms is caught up from each room's ring: it gets
// every position of both rooms once, in order, and stays connected.
func TestSeveralRoomsSlowViewerCaughtUp(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { slowConfig(c); c.WriteWait = 10 * time.Second })
	p := push.NewClient(testSecret, 2*time.Second)
	defer p.Close()
	a, b := newTLRoom(t, store), newTLRoom(t, store)
	a.content, b.content = strings.Repeat("x", 4000), strings.Repeat("y", 4000)
	ws, _, err := smallBufferDialer.Dial(wsURL(s, "room="+a.id+"&room="+b.id), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for range 2 {
		mustReadOp(t, wsviewer.Wrap(ws), opWelcome)
	}
	for range 30 {
		mustPush(t, p, s, a.write(1))
		mustPush(t, p, s, b.write(1))
	}
	time.Sleep(300 * time.Millisecond)
	expectRooms(t, readRooms(t, wsviewer.Wrap(ws), map[string]int64{a.id: 30, b.id: 30}), map[string][2]int64{a.id: {1, 30}, b.id: {1, 30}})
	expectValue(t, s.metrics.slowConsumers, 0, "cuts")
	if value(t, s.metrics.catchUps) < 1 {
		t.Fatal("the viewer was never caught up")
	}
	mustPush(t, p, s, a.write(1))
	mustPush(t, p, s, b.write(1))
	expectRooms(t, readRooms(t, wsviewer.Wrap(ws), map[string]int64{a.id: 31, b.id: 31}), map[string][2]int64{a.id: {31, 31}, b.id: {31, 31}})
}
