package comet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/route"
)

// The rooms of a /ws URL: every room once, in order; plain since/epoch
// for the first, since.ROOM/epoch.ROOM for any.
func TestRoomsOfURL(t *testing.T) {
	cases := []struct {
		query string
		want  string // room[/since/epoch] ..., then "bad:" count
	}{
		{"", "bad:0"},
		{"room=a", "a bad:0"},
		{"room=a&since=5&epoch=E", "a/5/E bad:0"},
		{"since=5&epoch=E&room=a", "a/5/E bad:0"},
		{"room=a&since=x&epoch=E", "a bad:0"},
		{"room=a&since=-1", "a bad:0"},
		{"room=a&since=5&epoch=E&room=b", "a/5/E b bad:0"},
		{"room=a&room=b&since.b=7&epoch.b=F", "a b/7/F bad:0"},
		{"room=a&since=1&epoch=E&since.a=2&epoch.a=G", "a/2/G bad:0"},
		{"room=a.b&since.a.b=3&epoch.a.b=E", "a.b/3/E bad:0"},
		{"room=a&room=&room=a&room=b%3Ac&room=c", "a c bad:1"},
		{"room=b%3Ac&room=c&since=4&epoch=E", "c bad:1"},
	}
	for _, tc := range cases {
		u := roomsOfURL(httptest.NewRequest("GET", "/ws?"+tc.query, nil))
		var parts []string
		for _, r := range u.reqs {
			p := r.room
			if r.resume {
				p += fmt.Sprintf("/%d/%s", r.since, r.epoch)
			}
			parts = append(parts, p)
		}
		parts = append(parts, fmt.Sprintf("bad:%d", len(u.bad)))
		if got := strings.Join(parts, " "); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.query, got, tc.want)
		}
	}
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
		mustReadOp(t, ws, opWelcome)
	}
	for range 30 {
		mustPush(t, p, s, a.write(1))
		mustPush(t, p, s, b.write(1))
	}
	time.Sleep(300 * time.Millisecond)
	expectRooms(t, readRooms(t, ws, map[string]int64{a.id: 30, b.id: 30}), map[string][2]int64{a.id: {1, 30}, b.id: {1, 30}})
	expectValue(t, s.metrics.slowConsumers, 0, "cuts")
	if value(t, s.metrics.catchUps) < 1 {
		t.Fatal("the viewer was never caught up")
	}
	mustPush(t, p, s, a.write(1))
	mustPush(t, p, s, b.write(1))
	expectRooms(t, readRooms(t, ws, map[string]int64{a.id: 31, b.id: 31}), map[string][2]int64{a.id: {31, 31}, b.id: {31, 31}})
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
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, CloseBanned) {
		t.Fatalf("after the last room's ban: %v, want close %d", err, CloseBanned)
	}
	expectRoutes(t, store, s, b, 0)
}

// The token's rooms claim is checked at every sub: a room outside it gets
// the error frame forbidden naming it, the connection keeps its rooms.
func TestTokenRoomsPerSub(t *testing.T) {
	keys := tokens.New(t)
	s := startWithAuth(t, keys)
	pfx := testkit.Uniq("live")
	other := testkit.Uniq("other-")
	ws := mustDial(t, s, "room="+pfx+"-1&room="+other+"&token="+keys.Token(t, 7, "", []string{pfx + "-*"}))
	if f := mustReadOp(t, ws, opWelcome); f.Room != pfx+"-1" {
		t.Fatalf("welcome %+v", f)
	}
	if f := mustReadOp(t, ws, opError); f.Code != codeForbidden || f.Room != other {
		t.Fatalf("URL room outside the token: %+v", f)
	}
	mustSend(t, ws, map[string]string{"op": "sub", "room": pfx + "-2"})
	if f := mustReadOp(t, ws, opWelcome); f.Room != pfx+"-2" {
		t.Fatalf("welcome %+v", f)
	}
	mustSend(t, ws, map[string]string{"op": "sub", "room": other})
	if f := mustReadOp(t, ws, opError); f.Code != codeForbidden || f.Room != other {
		t.Fatalf("sub outside the token: %+v", f)
	}
	for _, room := range []string{pfx + "-1", pfx + "-2"} {
		if n := s.Broadcast(batch(room, testkit.Uniq("m"))); n != 1 {
			t.Fatalf("broadcast to %s reached %d", room, n)
		}
		if f := mustReadOp(t, ws, danmaku.OpMsgs); f.Room != room {
			t.Fatalf("frame %+v, want room %s", f, room)
		}
	}
}

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
	expectOnlineFrames(t, x, map[string]int64{a: 1, b: 2})
	mustSend(t, y, map[string]string{"op": "unsub", "room": b})
	expectOnlineFrames(t, x, map[string]int64{b: 1})
}

// expectOnlineFrames reads frames from ws until the last online frame of each
// room of want says its count.
func expectOnlineFrames(tb testing.TB, ws *websocket.Conn, want map[string]int64) {
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

// The registry repairs count every room of a connection: after Redis lost
// everything, the lease renewal registers each room of each viewer again
// (one entry per room); a room's registration lost, a stale one left and a
// wrong count are set right by the reconcile.
func TestRegistryRepairSeveralRooms(t *testing.T) {
	_, rdb := redisserver.Private(t)
	s, store := startOn(t, rdb, func(c *Config) {
		c.LeaseRenew = 200 * time.Millisecond
		c.LeaseTTL = 10 * time.Second
		c.ReconcileInterval = 300 * time.Millisecond
	})
	a, b, c, gone := testkit.Uniq("rep"), testkit.Uniq("rep"), testkit.Uniq("rep"), testkit.Uniq("rep")
	x := mustDial(t, s, "room="+a+"&room="+b+"&room="+c+"&uid=ux")
	id := mustReadOp(t, x, opWelcome).ConnID
	mustReadOp(t, x, opWelcome)
	mustReadOp(t, x, opWelcome)
	y := mustDial(t, s, "room="+b+"&uid=uy")
	yid := mustReadOp(t, y, opWelcome).ConnID
	rooms := map[string][]string{a: {id}, b: {id + ".1", yid}, c: {id + ".2"}, gone: nil}
	check := func(what string) {
		t.Helper()
		for room, want := range rooms {
			expectMembers(t, rdb, room, want...)
			testkit.SucceedsSoon(t, 5*time.Second, func() error {
				n, err := rdb.HGet(context.Background(), "room:comets:{"+room+"}", s.ID()).Int64()
				if err != nil && err != redis.Nil {
					return err
				}
				if n != int64(len(want)) {
					return fmt.Errorf("%s: room %s counts %d for the comet, want %d", what, room, n, len(want))
				}
				return nil
			})
		}
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			n, err := rdb.HLen(context.Background(), "comet:connections:{"+s.ID()+"}").Result()
			held, registered := s.registryCounts()
			if err != nil || n != 4 || held != 4 || registered != 4 {
				return fmt.Errorf("%s: index lists %d (%v), held %d, registered %d; want 4", what, n, err, held, registered)
			}
			if v, err := rdb.HLen(context.Background(), "user:online:{ux}").Result(); err != nil || v != 3 {
				return fmt.Errorf("%s: user:online of ux lists %d (%v), want 3", what, v, err)
			}
			return nil
		})
	}
	check("joined")

	ctx := context.Background()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	check("after FLUSHALL")

	// A room's registration lost, a stale one left, a count wrong.
	if err := store.Unregister(ctx, route.Conn{ID: id + ".1", Room: b, User: "ux", Comet: s.ID()}); err != nil {
		t.Fatal(err)
	}
	if err := store.Register(ctx, route.Conn{ID: id + ".9", Room: gone, User: "ux", Comet: s.ID()}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "room:comets:{"+c+"}", s.ID(), 5).Err(); err != nil {
		t.Fatal(err)
	}
	check("after the reconcile")
	if v := value(t, s.metrics.repairedConns.WithLabelValues("removed")); v < 1 {
		t.Errorf("removed routes counted %v, want at least 1", v)
	}

	mustSend(t, x, map[string]string{"op": "unsub", "room": b})
	mustReadOp(t, x, opUnsubscribed)
	expectMembers(t, rdb, b, yid)
	x.Close()
	y.Close()
	for room := range rooms {
		expectMembers(t, rdb, room)
	}
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if held, _ := s.registryCounts(); held != 0 {
			return fmt.Errorf("held %d after every viewer left", held)
		}
		return nil
	})
}
