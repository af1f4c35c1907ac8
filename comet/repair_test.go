package comet

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// startOn starts a comet on rdb.
func startOn(t *testing.T, rdb redis.UniversalClient, mutate func(*Config)) (*Server, *route.Store) {
	t.Helper()
	cfg := testConfig(t)
	cfg.RedisTimeout = 300 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	store := route.New(rdb)
	s, err := New(cfg, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, store
}

// joinViewers connects n viewers to each room and waits for their welcome.
// It returns the connection ids by room.
func joinViewers(t *testing.T, s *Server, rooms []string, n int) map[string][]string {
	t.Helper()
	ids := map[string][]string{}
	for _, room := range rooms {
		for i := range n {
			ws := mustDial(t, s, fmt.Sprintf("room=%s&uid=u%d", room, i))
			ids[room] = append(ids[room], mustReadOp(t, ws, opWelcome).ConnID)
		}
	}
	return ids
}

// expectOnline waits up to d until every room's Online count and this
// comet's room:comets entry equal want.
func expectOnline(t *testing.T, store *route.Store, rdb redis.UniversalClient, s *Server, rooms []string, want int64, d time.Duration) {
	t.Helper()
	testkit.SucceedsSoon(t, d, func() error {
		ctx := context.Background()
		for _, room := range rooms {
			n, err := store.Online(ctx, room)
			if err != nil {
				return err
			}
			c, err := rdb.HGet(ctx, "room:comets:{"+room+"}", s.ID()).Int64()
			if err != nil && err != redis.Nil {
				return err
			}
			if n != want || c != want {
				return fmt.Errorf("room %s: online %d, comet count %d; want %d", room, n, c, want)
			}
		}
		return nil
	})
}

// Redis losing everything (FLUSHALL, then a kill -9 and an empty restart
// on the same port) while viewers stay connected: the comet notices at its
// next lease renewal and registers every viewer again.
func TestRedisLossReregistersViewers(t *testing.T) {
	srv, rdb := redisserver.Private(t)
	s, store := startOn(t, rdb, func(c *Config) {
		c.ReconcileInterval = time.Hour // only the lease renewal may repair
	})
	rooms := []string{testkit.Uniq("r-"), testkit.Uniq("r-")}
	joinViewers(t, s, rooms, 5)
	expectOnline(t, store, rdb, s, rooms, 5, 5*time.Second)
	ctx := context.Background()

	for _, loss := range []struct {
		name string
		do   func() error
	}{
		{"flushall", func() error { return rdb.FlushAll(ctx).Err() }},
		{"restart empty", srv.Restart},
	} {
		before := value(t, s.metrics.repairs.WithLabelValues(regReregister))
		if err := loss.do(); err != nil {
			t.Fatalf("%s: %v", loss.name, err)
		}
		lost := time.Now()
		// Within one renewal period plus the repair.
		expectOnline(t, store, rdb, s, rooms, 5, s.cfg.LeaseRenew+time.Second)
		t.Logf("%s: registered again after %v", loss.name, time.Since(lost))
		if n, err := rdb.HLen(ctx, "comet:connections:{"+s.ID()+"}").Result(); err != nil || n != 10 {
			t.Fatalf("%s: comet index lists %d (%v), want 10", loss.name, n, err)
		}
		if got := value(t, s.metrics.repairs.WithLabelValues(regReregister)); got != before+1 {
			t.Fatalf("%s: reregister repairs %v, want %v", loss.name, got, before+1)
		}
		if live, err := store.LiveComets(ctx); err != nil || live[s.ID()].Addr == "" {
			t.Fatalf("%s: lease %+v, %v", loss.name, live, err)
		}
	}
	held, registered := s.registryCounts()
	if held != 10 || registered != 10 {
		t.Fatalf("held %d, registered %d; want 10, 10", held, registered)
	}
}

// A register that lands after its unregister gave up (Redis paused during a
// join and a close) leaves a viewer in Redis that no comet holds; a route
// lost in Redis leaves a held viewer out. The anti-entropy pass fixes both
// within reconcile_interval.
func TestReconcileRemovesPhantomsAndRestoresLostRoutes(t *testing.T) {
	const interval = 300 * time.Millisecond
	srv, rdb := redisserver.Private(t)
	s, store := startOn(t, rdb, func(c *Config) {
		c.LeaseRenew = 10 * time.Second // the renewal's count check must not be what repairs
		c.LeaseTTL = 30 * time.Second
		c.ReconcileInterval = interval
	})
	room, empty := testkit.Uniq("r-"), testkit.Uniq("r-")
	ids := joinViewers(t, s, []string{room}, 2)
	ctx := context.Background()

	// The phantom sequence: join and close while Redis does not answer.
	resume := srv.PauseUntilResumed(t)
	ws := mustDial(t, s, "room="+empty)
	if f := mustReadOp(t, ws, opError); f.Code != codeUnavailable {
		t.Fatalf("error frame %+v", f)
	}
	ws.Close()
	time.Sleep(2 * s.cfg.RedisTimeout) // the unregister times out too
	resume()
	// A late write, as the paused sequence produces in some runs: a route of
	// this comet for a connection it does not hold.
	phantom := route.Conn{ID: "c-phantom-1", Room: empty, User: "ghost", Comet: s.ID()}
	if err := store.Register(ctx, phantom); err != nil {
		t.Fatal(err)
	}
	// And a held viewer's route lost.
	if err := store.Unregister(ctx, route.Conn{ID: ids[room][0], Room: room, User: "u0", Comet: s.ID()}); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	expectOnline(t, store, rdb, s, []string{empty}, 0, 2*interval+time.Second)
	expectOnline(t, store, rdb, s, []string{room}, 2, 2*interval+time.Second)
	t.Logf("reconciled after %v", time.Since(fixed))
	if n, err := rdb.Exists(ctx, "connection:info:{c-phantom-1}", "user:online:{ghost}").Result(); err != nil || n != 0 {
		t.Fatalf("phantom records left: %d, %v", n, err)
	}
	// A reconcile counts its changes once it returns; the routes above may
	// be seen fixed while it still runs.
	testkit.SucceedsSoon(t, 2*time.Second, func() error {
		if got := value(t, s.metrics.repairedConns.WithLabelValues("removed")); got < 1 {
			return fmt.Errorf("repaired removed = %v, want at least 1", got)
		}
		if got := value(t, s.metrics.repairedConns.WithLabelValues("added")); got < 1 {
			return fmt.Errorf("repaired added = %v, want at least 1", got)
		}
		return nil
	})
}

// A registry call that failed (Redis did not answer an unregister) leaves
// Redis in a state the comet cannot know, so the next lease renewal
// reconciles, though reconcile_interval is far off and the route counts
// agree. Until then a route damaged where the counts do not show it (a
// held viewer missing from its room's set) stays as it is.
func TestFailedCallReconciledAtRenewal(t *testing.T) {
	srv, rdb := redisserver.Private(t)
	s, _ := startOn(t, rdb, func(c *Config) {
		c.LeaseTTL = 30 * time.Second // the lease outlives the pause
		c.ReconcileInterval = time.Hour
	})
	room := testkit.Uniq("r-")
	leaving := mustDial(t, s, "room="+room+"&uid=u0")
	mustReadOp(t, leaving, opWelcome)
	kept := mustReadOp(t, mustDial(t, s, "room="+room+"&uid=u1"), opWelcome).ConnID
	ctx := context.Background()
	members := "room:connections:{" + room + "}"
	if err := rdb.SRem(ctx, members, kept).Err(); err != nil {
		t.Fatal(err)
	}
	reconciles := func() float64 { return value(t, s.metrics.repairs.WithLabelValues(regReconcile)) }
	time.Sleep(5 * s.cfg.LeaseRenew)
	if n := reconciles(); n != 0 {
		t.Fatalf("%v reconciles with counts that agree and no failed call", n)
	}

	resume := srv.PauseUntilResumed(t)
	leaving.Close()
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if held := s.reg.heldConns(); len(held) != 1 || held[0].ID != kept {
			return fmt.Errorf("held %v", held)
		}
		return nil
	})
	time.Sleep(2 * s.cfg.RedisTimeout) // the unregister times out
	resume()
	testkit.SucceedsSoon(t, 10*s.cfg.LeaseRenew+2*time.Second, func() error {
		if ok, err := rdb.SIsMember(ctx, members, kept).Result(); err != nil || !ok {
			return fmt.Errorf("held viewer in its room's set: %v (%v)", ok, err)
		}
		if n := reconciles(); n < 1 {
			return fmt.Errorf("%v reconciles", n)
		}
		return nil
	})
}

// A comet restarted with the id of one that was killed (no graceful
// shutdown) removes the routes the dead process left before it serves.
func TestLeftoverRoutesRemovedAtStart(t *testing.T) {
	rdb := redisserver.Client(t)
	store := route.New(rdb)
	ctx := context.Background()
	id, room := testkit.Uniq("comet-"), testkit.Uniq("r-")
	old := route.CometInfo{ID: id, Addr: "127.0.0.1:1", Started: time.Now().Add(-time.Minute)}
	if _, err := store.Heartbeat(ctx, old, time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := store.Register(ctx, route.Conn{ID: fmt.Sprintf("c-old-%s-%d", id, i), Room: room, User: fmt.Sprintf("u%d", i), Comet: id}); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := startOn(t, rdb, func(c *Config) { c.ID = id })
	// Start returned: nothing of the old process is left.
	if n, err := store.Online(ctx, room); err != nil || n != 0 {
		t.Fatalf("online %d (%v), want 0", n, err)
	}
	if n, err := rdb.Exists(ctx, "room:comets:{"+room+"}", "connection:info:{c-old-"+id+"-0}", "user:online:{u0}").Result(); err != nil || n != 0 {
		t.Fatalf("%d leftover keys (%v)", n, err)
	}
	if got := value(t, s.metrics.repairedConns.WithLabelValues("removed")); got != 3 {
		t.Fatalf("removed %v, want 3", got)
	}
	// The new process's viewers count normally.
	joinViewers(t, s, []string{room}, 2)
	expectRoutes(t, store, s, room, 2)
}

// /readyz fails while Redis does not answer and recovers with it.
func TestReadyzFollowsRedis(t *testing.T) {
	srv, rdb := redisserver.Private(t)
	s, _ := startOn(t, rdb, nil)
	status := func(base string) int {
		resp, err := http.Get("http://" + base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, addr := range []string{s.PublicAddr(), s.InternalAddr()} {
		if got := status(addr); got != http.StatusOK {
			t.Fatalf("%s readyz %d, want 200", addr, got)
		}
	}
	resume := srv.PauseUntilResumed(t)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if got := status(s.InternalAddr()); got != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz %d with redis paused", got)
		}
		return nil
	})
	resume()
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if got := status(s.InternalAddr()); got != http.StatusOK {
			return fmt.Errorf("readyz %d with redis back", got)
		}
		return nil
	})
}

// While the registry is rebuilt the comet is not ready.
func TestNotReadyWhileRebuilding(t *testing.T) {
	_, rdb := redisserver.Private(t)
	s, _ := startOn(t, rdb, nil)
	s.rebuilding.Store(true)
	if err := s.Ready(context.Background()); err != errRebuilding {
		t.Fatalf("ready while rebuilding: %v", err)
	}
	// The next renewal finishes the rebuild (nothing to write) and the
	// comet is ready again.
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return s.Ready(context.Background()) })
}

// Joiners of a room whose history read just failed are served from what
// the comet holds instead of each waiting out its own Redis timeout: with
// Redis stalled, the first of five joins waits for the timeout, the other
// four do not read.
func TestJoinsSkipReadsAfterAFailedOne(t *testing.T) {
	s, srv := startOnPrivateRedis(t, 400*time.Millisecond)
	room := testkit.Uniq("r-")
	r := s.hub.roomFor(room)
	resume := srv.PauseUntilResumed(t)
	defer resume()
	start := time.Now()
	for range 5 {
		s.prepareJoin(r, joinReq{room: room})
	}
	if took := time.Since(start); took > 3*s.cfg.RedisTimeout {
		t.Fatalf("five joins took %v with Redis stalled, want about one timeout (%v)", took, s.cfg.RedisTimeout)
	}
	expectValue(t, s.metrics.historyReads.WithLabelValues(repairJoin), 1, "history reads for the joins")
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
