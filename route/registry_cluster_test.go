package route_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/route"
)

// idOn returns an id with prefix whose hash tag lives on a master for which
// want returns true.
func idOn(t *testing.T, c *redisserver.Cluster, prefix string, want func(*redisserver.Server) bool) string {
	t.Helper()
	for i := 0; i < 200; i++ {
		id := testkit.Uniq(prefix)
		m, err := c.Master(redisserver.Slot("{" + id + "}"))
		if err != nil {
			t.Fatal(err)
		}
		if want(m) {
			return id
		}
	}
	t.Fatalf("no %s id on the wanted master", prefix)
	return ""
}

// refuseWrites makes the master m refuse every write (min-replicas-to-write
// 1 on a master without replicas: NOREPLICAS) until the test ends, while the
// other masters serve: a call spread over several masters then fails on
// one of them only. It returns the function that lets m write again.
func refuseWrites(t *testing.T, m *redisserver.Server) (restore func()) {
	t.Helper()
	set := func(n string) error {
		c := redis.NewClient(&redis.Options{Addr: m.Addr})
		defer c.Close()
		return c.ConfigSet(context.Background(), "min-replicas-to-write", n).Err()
	}
	if err := set("1"); err != nil {
		t.Fatal(err)
	}
	restore = func() {
		if err := set("0"); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { set("0") })
	return restore
}

// On a cluster, a registration change cut short on one master leaves only
// traces the comet's index lists: an Unregister whose room's master did not
// answer keeps the index entry (so Reconcile removes the member once the
// master answers), and a Register whose index master did not answer writes
// nothing else.
func TestRegistryCutShortOnCluster(t *testing.T) {
	c := redisserver.SharedCluster(t)
	s := route.New(redisserver.ClusterClient(t))
	ctx := context.Background()
	room := testkit.Uniq("room")
	roomMaster, err := c.Master(redisserver.Slot("{" + room + "}"))
	if err != nil {
		t.Fatal(err)
	}
	other := func(m *redisserver.Server) bool { return m != roomMaster }
	comet := idOn(t, c, "comet", other)
	conn := route.Conn{ID: idOn(t, c, "conn", other), Room: room, User: idOn(t, c, "user", other), Comet: comet}
	if err := s.Register(ctx, conn); err != nil {
		t.Fatal(err)
	}

	restore := refuseWrites(t, roomMaster)
	if err := s.Unregister(ctx, conn); err == nil {
		t.Fatal("unregister succeeded with the room's master refusing writes")
	}
	// Once the master writes again, the member is still there, and the
	// index still lists it: Reconcile of a comet that holds nothing removes
	// it.
	restore()
	if n, err := s.Online(ctx, room); err != nil || n != 1 {
		t.Fatalf("online %d %v after the cut-short unregister, want the member still there", n, err)
	}
	rep, err := s.Reconcile(ctx, comet, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Online(ctx, room); err != nil || n != 0 {
		t.Fatalf("online %d %v after Reconcile (%+v), want 0: the member of the cut-short unregister stayed", n, err, rep)
	}

	// A Register whose index master does not answer leaves nothing.
	conn2 := route.Conn{ID: idOn(t, c, "conn", other), Room: room, Comet: comet}
	cometMaster, err := c.Master(redisserver.Slot("{" + comet + "}"))
	if err != nil {
		t.Fatal(err)
	}
	restore = refuseWrites(t, cometMaster)
	if err := s.Register(ctx, conn2); err == nil {
		t.Fatal("register succeeded with the index's master refusing writes")
	}
	restore()
	if n, err := s.Online(ctx, room); err != nil || n != 0 {
		t.Fatalf("online %d %v after a register whose index write failed, want 0 (nothing the index does not list)", n, err)
	}
}

// RegisterMany registers a batch as Register would each connection: a
// banned user is refused (and only that one), every other member is in its
// room, and each answer carries its room's count after the batch.
func TestRegisterMany(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *route.Store, _ redis.UniversalClient) {
		comet, r1, r2 := testkit.Uniq("comet"), testkit.Uniq("room"), testkit.Uniq("room")
		banned := testkit.Uniq("user")
		if err := s.Ban(ctx, banned, r1, time.Minute); err != nil {
			t.Fatal(err)
		}
		conns := []route.Conn{
			{ID: testkit.Uniq("c"), Room: r1, User: testkit.Uniq("user"), Comet: comet},
			{ID: testkit.Uniq("c"), Room: r2, Comet: comet},
			{ID: testkit.Uniq("c"), Room: r1, User: banned, Comet: comet},
			{ID: testkit.Uniq("c"), Room: r1, Comet: comet},
		}
		regs, err := s.RegisterMany(ctx, conns)
		if err != nil {
			t.Fatal(err)
		}
		wantOnline := []int64{2, 1, 2, 2}
		for i, r := range regs {
			var ban *route.BanError
			if isBan := errors.As(r.Err, &ban); isBan != (i == 2) || (r.Err != nil && !isBan) {
				t.Errorf("conn %d: err %v, want a ban error only for the banned user", i, r.Err)
			}
			if r.Online != wantOnline[i] {
				t.Errorf("conn %d: online %d, want %d", i, r.Online, wantOnline[i])
			}
		}
		for room, want := range map[string]int64{r1: 2, r2: 1} {
			if n, err := s.Online(ctx, room); err != nil || n != want {
				t.Errorf("online(%s) = %d %v, want %d", room, n, err, want)
			}
		}
	})
}
