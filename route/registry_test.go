package route_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

// checkInvariants verifies the registry of rooms against the expected live
// connections: counts equal set sizes per comet, no empty or non-positive
// count fields, and every per-connection record agrees.
func checkInvariants(t *testing.T, rdb redis.UniversalClient, rooms []string, live map[string]route.Conn) {
	t.Helper()
	ctx := context.Background()
	s := route.New(rdb)
	wantByRoom := map[string]map[string]int64{}
	for _, c := range live {
		if wantByRoom[c.Room] == nil {
			wantByRoom[c.Room] = map[string]int64{}
		}
		wantByRoom[c.Room][c.Comet]++
	}
	for _, room := range rooms {
		raw, err := rdb.HGetAll(ctx, "room:comets:{"+room+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for comet, v := range raw {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n <= 0 {
				t.Errorf("room %s: field %s = %q left behind", room, comet, v)
			}
			if n != wantByRoom[room][comet] {
				t.Errorf("room %s comet %s: count %d, want %d", room, comet, n, wantByRoom[room][comet])
			}
			sum += n
		}
		card, _ := s.Online(ctx, room)
		if sum != card {
			t.Errorf("room %s: sum of counts %d != SCARD %d", room, sum, card)
		}
		var want int64
		for _, n := range wantByRoom[room] {
			want += n
		}
		if card != want {
			t.Errorf("room %s: %d viewers, want %d", room, card, want)
		}
		// The lookup through every connection's info agrees with the index.
		for comet, conns := range seedRoutes(t, rdb, room) {
			if int64(len(conns)) != wantByRoom[room][comet] {
				t.Errorf("room %s comet %s: seed lookup %d conns, want %d", room, comet, len(conns), wantByRoom[room][comet])
			}
		}
	}
	for id, c := range live {
		if got, ok := connectionInfo(t, rdb, id); !ok || got != c {
			t.Errorf("connection %s: info %+v (found %v), want %+v", id, got, ok, c)
		}
		if c.User != "" {
			if comet := rdb.HGet(ctx, "user:online:{"+c.User+"}", id).Val(); comet != c.Comet {
				t.Errorf("user %s conn %s: online on %q, want %q", c.User, id, comet, c.Comet)
			}
		}
	}
}

func TestRegistryJoinLeave(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		room, comet, user := testkit.Uniq("room"), testkit.Uniq("comet"), testkit.Uniq("u")
		c := route.Conn{ID: testkit.Uniq("c"), Room: room, User: user, Comet: comet}
		for i := 0; i < 2; i++ { // idempotent
			if err := s.Register(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		checkInvariants(t, rdb, []string{room}, map[string]route.Conn{c.ID: c})
		if got := roomComets(t, rdb, room); got[comet] != 1 || len(got) != 1 {
			t.Fatalf("room comets = %v", got)
		}
		for i := 0; i < 2; i++ {
			if err := s.Unregister(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		checkInvariants(t, rdb, []string{room}, nil)
		for _, k := range []string{"room:connections:{" + room + "}", "room:comets:{" + room + "}",
			"connection:info:{" + c.ID + "}", "user:online:{" + user + "}", "comet:connections:{" + comet + "}"} {
			if rdb.Exists(ctx, k).Val() != 0 {
				t.Errorf("%s left behind", k)
			}
		}
	})
}

func TestRegistryConsistencyUnderConcurrency(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		rooms := []string{testkit.Uniq("room"), testkit.Uniq("room"), testkit.Uniq("room"), testkit.Uniq("room"), testkit.Uniq("room")}
		comets := []string{testkit.Uniq("comet"), testkit.Uniq("comet"), testkit.Uniq("comet"), testkit.Uniq("comet")}
		var mu sync.Mutex
		live := map[string]route.Conn{}
		var wg sync.WaitGroup
		for g := 0; g < 50; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 7))
				var mine []route.Conn
				for op := 0; op < 40; op++ {
					if len(mine) > 0 && r.IntN(3) == 0 {
						i := r.IntN(len(mine))
						c := mine[i]
						mine = append(mine[:i], mine[i+1:]...)
						if err := s.Unregister(ctx, c); err != nil {
							t.Error(err)
							return
						}
						// A room switch is leave + join with the same id.
						if r.IntN(2) == 0 {
							c.Room = rooms[r.IntN(len(rooms))]
							if err := s.Register(ctx, c); err != nil {
								t.Error(err)
								return
							}
							mine = append(mine, c)
						}
						continue
					}
					c := route.Conn{
						ID:    fmt.Sprintf("%s-g%d-%d", comets[0], g, op),
						Room:  rooms[r.IntN(len(rooms))],
						User:  "u" + strconv.Itoa(r.IntN(10)) + comets[0],
						Comet: comets[r.IntN(len(comets))],
					}
					if err := s.Register(ctx, c); err != nil {
						t.Error(err)
						return
					}
					mine = append(mine, c)
				}
				mu.Lock()
				for _, c := range mine {
					live[c.ID] = c
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if len(live) == 0 {
			t.Fatal("no connections left to check")
		}
		checkInvariants(t, rdb, rooms, live)
	})
}

func TestDeadCometCleanup(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		rooms := []string{testkit.Uniq("room"), testkit.Uniq("room")}
		dead, alive := testkit.Uniq("comet"), testkit.Uniq("comet")
		if _, err := s.Heartbeat(ctx, route.CometInfo{ID: dead, Addr: "127.0.0.1:1", Started: time.Now()}, 150*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Heartbeat(ctx, route.CometInfo{ID: alive, Addr: "127.0.0.1:2", Started: time.Now()}, time.Minute); err != nil {
			t.Fatal(err)
		}
		keep := map[string]route.Conn{}
		for i := 0; i < 30; i++ {
			comet := dead
			if i%3 == 0 {
				comet = alive
			}
			c := route.Conn{ID: fmt.Sprintf("%s-%d", comet, i), Room: rooms[i%2], Comet: comet, User: fmt.Sprintf("%s-u%d", rooms[0], i%4)}
			if err := s.Register(ctx, c); err != nil {
				t.Fatal(err)
			}
			if comet == alive {
				keep[c.ID] = c
			}
		}
		// The short lease is renewed after the registrations, which on a
		// loaded machine may take longer than it lasts.
		if _, err := s.Heartbeat(ctx, route.CometInfo{ID: dead, Addr: "127.0.0.1:1", Started: time.Now()}, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		live, err := s.LiveComets(ctx)
		if err != nil || live[dead].Addr != "127.0.0.1:1" || live[alive].Addr != "127.0.0.1:2" {
			t.Fatalf("live comets = %v %v", live, err)
		}
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			d, err := s.DeadComets(ctx)
			if err == nil && (!slices.Contains(d, dead) || slices.Contains(d, alive)) {
				err = fmt.Errorf("dead comets %v, want %s and not %s", d, dead, alive)
			}
			return err
		})
		live, _ = s.LiveComets(ctx)
		if _, ok := live[dead]; ok {
			t.Fatal("expired comet still listed as live")
		}
		n, err := s.RemoveComet(ctx, dead)
		if err != nil || n != 20 {
			t.Fatalf("RemoveComet = %d, %v; want 20", n, err)
		}
		checkInvariants(t, rdb, rooms, keep)
		for _, room := range rooms {
			rc := roomComets(t, rdb, room)
			if _, ok := rc[dead]; ok || len(rc) != 1 {
				t.Fatalf("room %s comets after cleanup: %v", room, rc)
			}
		}
		if d, _ := s.DeadComets(ctx); slices.Contains(d, dead) {
			t.Fatal("removed comet still in the index")
		}
		if rdb.Exists(ctx, "comet:connections:{"+dead+"}").Val() != 0 {
			t.Fatal("dead comet's connection index left behind")
		}
	})
}

// A comet that renews its lease after the janitor listed it as dead keeps
// its routes and its lease: RemoveDeadComet checks the lease again.
func TestRemoveDeadCometRenewed(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		room, comet := testkit.Uniq("room"), testkit.Uniq("comet")
		info := route.CometInfo{ID: comet, Addr: "127.0.0.1:3", Started: time.Now()}
		if _, err := s.Heartbeat(ctx, info, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		c := route.Conn{ID: comet + "-1", Room: room, Comet: comet}
		if err := s.Register(ctx, c); err != nil {
			t.Fatal(err)
		}
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			d, err := s.DeadComets(ctx)
			if err == nil && !slices.Contains(d, comet) {
				err = fmt.Errorf("dead comets %v, want %s", d, comet)
			}
			return err
		})
		if _, err := s.Heartbeat(ctx, info, time.Minute); err != nil {
			t.Fatal(err)
		}
		n, renewed, err := s.RemoveDeadComet(ctx, comet)
		if err != nil || !renewed || n != 0 {
			t.Fatalf("RemoveDeadComet of a renewed comet = %d, %v, %v; want 0, renewed", n, renewed, err)
		}
		if live, _ := s.LiveComets(ctx); live[comet].Addr != info.Addr {
			t.Fatalf("the renewed lease is gone: %v", live)
		}
		if on, _ := s.Online(ctx, room); on != 1 {
			t.Fatalf("online %d after RemoveDeadComet of a renewed comet, want 1", on)
		}
		// Once the lease is gone for good, the routes go.
		if _, err := s.Heartbeat(ctx, info, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		n, renewed, err = s.RemoveDeadComet(ctx, comet)
		if err != nil || renewed || n != 1 {
			t.Fatalf("RemoveDeadComet of a dead comet = %d, %v, %v; want 1 removed", n, renewed, err)
		}
		if on, _ := s.Online(ctx, room); on != 0 {
			t.Fatalf("online %d after RemoveDeadComet, want 0", on)
		}
	})
}

// A comet that renews its lease while the janitor removes its routes stops
// the removal: its lease, its index and the rooms not reached yet stay.
func TestRemoveDeadCometRenewedMidway(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, rdb redis.UniversalClient) {
		comet := testkit.Uniq("comet")
		info := route.CometInfo{ID: comet, Addr: "127.0.0.1:4", Started: time.Now()}
		index := "comet:connections:{" + comet + "}"
		const rooms = 400
		var conns []route.Conn
		for i := range rooms {
			conns = append(conns, route.Conn{ID: fmt.Sprintf("%s-%d", comet, i), Room: testkit.Uniq("room"), Comet: comet})
		}
		if _, err := s.RegisterAll(ctx, comet, conns); err != nil {
			t.Fatal(err)
		}
		// The comet renews its lease once the removal has taken ten rooms.
		renewedAt := make(chan int64, 1)
		go func() {
			defer close(renewedAt)
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if n, err := rdb.HLen(ctx, index).Result(); err == nil && n <= rooms-10 {
					s.Heartbeat(ctx, info, time.Minute)
					renewedAt <- n
					return
				}
			}
		}()
		removed, renewed, err := s.RemoveDeadComet(ctx, comet)
		at, ok := <-renewedAt
		if !ok {
			t.Fatal("the removal never took ten rooms")
		}
		if err != nil || !renewed || removed >= rooms || removed < int(rooms-at) {
			t.Fatalf("RemoveDeadComet = %d, %v, %v; want renewed after at least %d of %d", removed, renewed, err, rooms-at, rooms)
		}
		if live, _ := s.LiveComets(ctx); live[comet].Addr != info.Addr {
			t.Fatalf("the renewed lease is gone: %v", live)
		}
		if n, err := rdb.HLen(ctx, index).Result(); err != nil || n != int64(rooms-removed) {
			t.Fatalf("index holds %d (%v) after %d removed, want %d", n, err, removed, rooms-removed)
		}
		t.Logf("renewed after %d of %d rooms; the removal stopped after %d", rooms-at, rooms, removed)
	})
}
