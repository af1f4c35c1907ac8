package route_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// viewers returns n connections of comet spread over rooms: the first big
// ones in rooms[0], the rest round robin over the others; every third is
// anonymous and the others share users by twos (a user with two tabs).
func viewers(comet string, n, big int, rooms []string) []route.Conn {
	out := make([]route.Conn, n)
	for i := range out {
		room := rooms[0]
		if i >= big && len(rooms) > 1 {
			room = rooms[1+i%(len(rooms)-1)]
		}
		user := ""
		if i%3 != 0 {
			user = fmt.Sprintf("%s-u%d", comet, i/2)
		}
		out[i] = route.Conn{ID: fmt.Sprintf("%s-c%d", comet, i), Room: room, User: user, Comet: comet}
	}
	return out
}

func byID(sets ...[]route.Conn) map[string]route.Conn {
	m := map[string]route.Conn{}
	for _, s := range sets {
		for _, c := range s {
			m[c.ID] = c
		}
	}
	return m
}

func roomsOf(n int) []string {
	rooms := make([]string, n)
	for i := range rooms {
		rooms[i] = testkit.Uniq("room")
	}
	return rooms
}

// checkIndex verifies that the comet's index lists exactly want.
func checkIndex(t *testing.T, rdb redis.UniversalClient, comet string, want []route.Conn) {
	t.Helper()
	got, err := rdb.HGetAll(context.Background(), "comet:connections:{"+comet+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("comet %s index lists %d connections, want %d", comet, len(got), len(want))
	}
	for _, c := range want {
		if v := got[c.ID]; v != c.Room+":"+c.User {
			t.Errorf("comet %s index %s = %q, want %q", comet, c.ID, v, c.Room+":"+c.User)
		}
	}
}

// checkGone verifies that no record of the connections is left.
func checkGone(t *testing.T, rdb redis.UniversalClient, gone []route.Conn) {
	t.Helper()
	ctx := context.Background()
	for _, c := range gone {
		if rdb.Exists(ctx, "connection:info:{"+c.ID+"}").Val() != 0 {
			t.Errorf("connection:info of %s left behind", c.ID)
		}
		if c.User != "" && rdb.HExists(ctx, "user:online:{"+c.User+"}", c.ID).Val() {
			t.Errorf("user:online of %s has %s left behind", c.User, c.ID)
		}
		if rdb.SIsMember(ctx, "room:connections:{"+c.Room+"}", c.ID).Val() {
			t.Errorf("room %s still lists %s", c.Room, c.ID)
		}
	}
}

func TestHeartbeatReportsLoss(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		info := route.CometInfo{ID: testkit.Uniq("comet"), Addr: "127.0.0.1:1", Started: time.Now()}
		beat := func(c route.CometInfo, ttl time.Duration) route.LeaseState {
			t.Helper()
			st, err := s.Heartbeat(ctx, c, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		if st := beat(info, time.Minute); !st.Lost || st.Registered != 0 {
			t.Fatalf("first heartbeat = %+v, want lost with nothing registered", st)
		}
		if st := beat(info, time.Minute); st.Lost {
			t.Fatalf("second heartbeat = %+v, want kept", st)
		}
		within(t, "lease PTTL", pttl(t, rdb, "comet:{"+info.ID+"}"), 59*time.Second, time.Minute)
		if live, _ := s.LiveComets(ctx); live[info.ID].Addr != info.Addr {
			t.Fatalf("heartbeat did not publish the comet: %v", live)
		}
		conns := viewers(info.ID, 3, 3, roomsOf(1))
		if _, err := s.RegisterAll(ctx, info.ID, conns); err != nil {
			t.Fatal(err)
		}
		if st := beat(info, time.Minute); st.Lost || st.Registered != 3 {
			t.Fatalf("heartbeat = %+v, want kept with 3 registered", st)
		}

		// Redis lost the lease (restart, failover): reported once.
		rdb.Del(ctx, "comet:{"+info.ID+"}")
		if st := beat(info, time.Minute); !st.Lost || st.Registered != 3 {
			t.Fatalf("heartbeat after loss = %+v, want lost, 3 registered", st)
		}
		if st := beat(info, time.Minute); st.Lost {
			t.Fatalf("heartbeat after re-creation = %+v, want kept", st)
		}

		// Another process took the id: both sides see it.
		twin := info
		twin.Started = info.Started.Add(time.Second)
		if st := beat(twin, time.Minute); !st.Lost {
			t.Fatal("a second process with the same id was not reported")
		}
		if st := beat(info, time.Minute); !st.Lost {
			t.Fatal("the first process did not see its lease taken")
		}

		// The lease expired (a stall longer than its ttl).
		beat(info, 50*time.Millisecond)
		testkit.SucceedsSoon(t, 2*time.Second, func() error {
			if rdb.Exists(ctx, "comet:{"+info.ID+"}").Val() != 0 {
				return errors.New("lease still there")
			}
			return nil
		})
		if st := beat(info, time.Minute); !st.Lost {
			t.Fatal("expired lease not reported")
		}

		if _, err := s.Heartbeat(ctx, info, 0); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("zero ttl: %v, want EINVALID", err)
		}
	})
}

func TestRegisterAll(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		rooms := roomsOf(4)
		comet, other := testkit.Uniq("comet"), testkit.Uniq("comet")
		mine := viewers(comet, 1000, 700, rooms) // rooms[0] spans two slices
		theirs := viewers(other, 20, 20, rooms)
		for _, c := range append(mine[:50:50], theirs...) {
			if err := s.Register(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		added, err := s.RegisterAll(ctx, comet, append(mine, mine[100:105]...))
		if err != nil || added != 950 {
			t.Fatalf("RegisterAll = %d, %v; want 950 added", added, err)
		}
		checkInvariants(t, rdb, rooms, byID(mine, theirs))
		checkIndex(t, rdb, comet, mine)
		if added, err = s.RegisterAll(ctx, comet, mine); err != nil || added != 0 {
			t.Fatalf("repeated RegisterAll = %d, %v; want 0 added", added, err)
		}
		checkInvariants(t, rdb, rooms, byID(mine, theirs))

		stray := route.Conn{ID: testkit.Uniq("c"), Room: rooms[1], Comet: other}
		if _, err := s.RegisterAll(ctx, comet, []route.Conn{stray}); danmaku.ErrorCode(err) != danmaku.EINVALID {
			t.Fatalf("connection of another comet: %v, want EINVALID", err)
		}
	})
}

func TestReconcile(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		rooms := roomsOf(5)
		comet, other := testkit.Uniq("comet"), testkit.Uniq("comet")
		held := viewers(comet, 900, 600, rooms[:4])
		theirs := viewers(other, 30, 10, rooms)
		if _, err := s.RegisterAll(ctx, comet, held); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterAll(ctx, other, theirs); err != nil {
			t.Fatal(err)
		}
		// Phantoms: registered late, after their unregister; one in a room
		// the comet holds nobody in.
		phantoms := viewers(comet+"-p", 7, 6, []string{rooms[1], rooms[4]})
		for i := range phantoms {
			phantoms[i].Comet = comet
			if err := s.Register(ctx, phantoms[i]); err != nil {
				t.Fatal(err)
			}
		}
		// Lost entirely.
		for _, c := range held[10:15] {
			if err := s.Unregister(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		// Lost from the room (and their info) only.
		for _, c := range held[20:23] {
			rdb.SRem(ctx, "room:connections:{"+c.Room+"}", c.ID)
			rdb.HIncrBy(ctx, "room:comets:{"+c.Room+"}", comet, -1)
			rdb.Del(ctx, "connection:info:{"+c.ID+"}")
		}
		// Moved: Redis still has them in their old room.
		moved := append([]route.Conn(nil), held[700:702]...)
		for i := 700; i < 702; i++ {
			held[i].Room = rooms[0]
		}
		// A ghost credited to the comet that its index does not list, and a
		// count that drifted from the members.
		ghost := route.Conn{ID: testkit.Uniq("ghost"), Room: rooms[2], User: testkit.Uniq("u"), Comet: comet}
		rdb.SAdd(ctx, "room:connections:{"+ghost.Room+"}", ghost.ID)
		rdb.HIncrBy(ctx, "room:comets:{"+ghost.Room+"}", comet, 1)
		rdb.HSet(ctx, "connection:info:{"+ghost.ID+"}", "comet_id", comet, "user_id", ghost.User, "room_id", ghost.Room)
		rdb.HSet(ctx, "user:online:{"+ghost.User+"}", ghost.ID, comet)
		rdb.HIncrBy(ctx, "room:comets:{"+rooms[3]+"}", comet, 4)

		rep, err := s.Reconcile(ctx, comet, held)
		if err != nil {
			t.Fatal(err)
		}
		if want := (route.Repair{Added: 5 + 3 + 2, Removed: 7 + 1, Corrected: 2}); rep != want {
			t.Fatalf("Reconcile = %+v, want %+v", rep, want)
		}
		checkInvariants(t, rdb, rooms, byID(held, theirs))
		checkIndex(t, rdb, comet, held)
		checkGone(t, rdb, append(phantoms, ghost))
		if rc := roomComets(t, rdb, rooms[4]); rc[comet] != 0 {
			t.Fatalf("room the comet left still counts it: %v", rc)
		}
		for _, c := range moved {
			if rdb.SIsMember(ctx, "room:connections:{"+c.Room+"}", c.ID).Val() {
				t.Fatalf("moved %s still in its old room", c.ID)
			}
		}
		if rep, err := s.Reconcile(ctx, comet, held); err != nil || rep.Changed() {
			t.Fatalf("second Reconcile = %+v, %v; want nothing to fix", rep, err)
		}

		// A comet that holds nobody any more.
		rep, err = s.Reconcile(ctx, comet, nil)
		if err != nil || rep != (route.Repair{Removed: len(held)}) {
			t.Fatalf("Reconcile of nothing = %+v, %v; want %d removed", rep, err, len(held))
		}
		checkInvariants(t, rdb, rooms, byID(theirs))
		checkGone(t, rdb, held)
	})
}

// TestRedisLostEverything empties a Redis of its own (data and script cache,
// as a restart without persistence does) under a registered comet: the
// heartbeat reports it, and RegisterAll or Reconcile alone restore the
// registry.
func TestRedisLostEverything(t *testing.T) {
	srv, err := redisserver.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	s := route.New(rdb)
	rooms := roomsOf(3)
	info := route.CometInfo{ID: testkit.Uniq("comet"), Addr: "127.0.0.1:1", Started: time.Now()}
	held := viewers(info.ID, 600, 520, rooms)
	lose := func() {
		t.Helper()
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Heartbeat(ctx, info, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterAll(ctx, info.ID, held); err != nil {
		t.Fatal(err)
	}
	lose()
	st, err := s.Heartbeat(ctx, info, time.Minute)
	if err != nil || !st.Lost || st.Registered != 0 {
		t.Fatalf("heartbeat after the loss = %+v, %v", st, err)
	}
	if n, err := s.RegisterAll(ctx, info.ID, held); err != nil || n != len(held) {
		t.Fatalf("RegisterAll = %d, %v; want %d", n, err, len(held))
	}
	checkInvariants(t, rdb, rooms, byID(held))

	lose()
	rep, err := s.Reconcile(ctx, info.ID, held)
	if err != nil || rep != (route.Repair{Added: len(held)}) {
		t.Fatalf("Reconcile after the loss = %+v, %v", rep, err)
	}
	checkInvariants(t, rdb, rooms, byID(held))
	checkIndex(t, rdb, info.ID, held)
}

// TestCometRestartAfterKill is a comet killed with -9 and restarted with the
// same id within its lease: the new process removes the old routes before
// registering its own viewers.
func TestCometRestartAfterKill(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		rooms := roomsOf(5)
		info := route.CometInfo{ID: testkit.Uniq("comet"), Addr: "127.0.0.1:1", Started: time.Now()}
		other := testkit.Uniq("comet")
		old := viewers(info.ID, 500, 100, rooms)
		theirs := viewers(other, 50, 10, rooms)
		for i := range theirs { // users with a tab on each comet
			theirs[i].User = old[i].User
		}
		if _, err := s.Heartbeat(ctx, info, time.Minute); err != nil {
			t.Fatal(err)
		}
		for _, c := range append(old, theirs...) {
			if err := s.Register(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		// kill -9: nothing is unregistered. The new process starts.
		restarted := info
		restarted.Started = info.Started.Add(time.Second)
		if n, err := s.RemoveComet(ctx, restarted.ID); err != nil || n != len(old) {
			t.Fatalf("RemoveComet = %d, %v; want %d", n, err, len(old))
		}
		checkGone(t, rdb, old)
		checkInvariants(t, rdb, rooms, byID(theirs))
		for _, k := range []string{"comet:{" + info.ID + "}", "comet:connections:{" + info.ID + "}"} {
			if rdb.Exists(ctx, k).Val() != 0 {
				t.Errorf("%s left behind", k)
			}
		}
		st, err := s.Heartbeat(ctx, restarted, time.Minute)
		if err != nil || !st.Lost || st.Registered != 0 {
			t.Fatalf("first heartbeat of the new process = %+v, %v", st, err)
		}
		fresh := viewers(info.ID+"-2", 200, 50, rooms)
		for i := range fresh {
			fresh[i].Comet = info.ID
		}
		if _, err := s.RegisterAll(ctx, info.ID, fresh[:150]); err != nil {
			t.Fatal(err)
		}
		for _, c := range fresh[150:] {
			if err := s.Register(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		checkInvariants(t, rdb, rooms, byID(theirs, fresh))
		checkIndex(t, rdb, info.ID, fresh)
		checkGone(t, rdb, old)
		if rep, err := s.Reconcile(ctx, info.ID, fresh); err != nil || rep.Changed() {
			t.Fatalf("Reconcile after the restart = %+v, %v; want nothing to fix", rep, err)
		}
	})
}
