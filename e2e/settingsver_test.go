package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
	"github.com/danmaku/danmaku/route"
)

// A settings change and a pin whose events no comet got (written to Redis
// without their Kafka events, as a comet that was away when job pushed
// them sees it) reach the viewers of both comets with the room's next
// comment: job's push carries the settings' version, and a comet behind it
// reads the settings and the pin again, sends the state and pin frames and
// welcomes later viewers with them; a change missed again is caught by the
// next event job pushes (a delete). Without the version the comets kept the
// old settings for as long as the room had viewers.
func TestMissedSettingsCaughtByTheNextPush(t *testing.T) {
	s := newModesStack(t)
	room := testkit.Uniq("missed_")
	views := []*wsviewer.Viewer{s.Viewer(t, room, s.Comets[0]), s.Viewer(t, room, s.Comets[1])}
	first, err := stack.Post(s.LogicURL, room, 9401, "a", []string{"before the change"})
	if err != nil {
		t.Fatal(err)
	}
	wsviewer.DeliveredOnce(t, 15*time.Second, first, views...)

	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: strings.Split(s.RedisAddrs(), ",")})
	defer rdb.Close()
	store := route.New(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slow := 30
	st, err := store.SetRoomState(ctx, room, route.StatePatch{SlowSeconds: &slow})
	if err != nil {
		t.Fatal(err)
	}
	pin, err := store.SetPin(ctx, room, danmaku.Pin{ID: "missedpin", Content: "pinned while away", Until: time.Now().Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	for i, v := range views {
		if len(v.States()) != 0 || len(v.Pins()) != 0 {
			t.Fatalf("viewer %d was told without a push: %+v %+v", i, v.States(), v.Pins())
		}
	}

	next, err := stack.Post(s.LogicURL, room, 9402, "b", []string{"after the change"})
	if err != nil {
		t.Fatal(err)
	}
	wsviewer.DeliveredOnce(t, 15*time.Second, append(first, next...), views...)
	want := st
	want.Ver = pin.Ver // the pin took the settings' next version
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		for i, v := range views {
			sts, pins := v.States(), v.Pins()
			if len(sts) != 1 || sts[0].State != want || len(pins) != 1 || pins[0].Op != danmaku.OpPin || pins[0].Pin != pin {
				return fmt.Errorf("viewer %d: states %+v, pins %+v; want %+v and %+v", i, sts, pins, want, pin)
			}
		}
		return nil
	})
	unique := 60
	again, err := store.SetRoomState(ctx, room, route.StatePatch{UniqueSeconds: &unique})
	if err != nil {
		t.Fatal(err)
	}
	modesAdmin(t, s.LogicURL, "/logic/admin/delete", `{"roomId":"`+room+`","ids":["`+first[0]+`"]}`, nil)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		for i, v := range views {
			if sts := v.States(); len(sts) != 2 || sts[1].State != again {
				return fmt.Errorf("viewer %d: states %+v, want %+v last", i, sts, again)
			}
		}
		return nil
	})
	want = again
	for i, c := range s.Comets {
		late := wsviewer.Once(t, c.WS(), room, nil)
		late.WaitWelcomes(t, 1, 5*time.Second)
		if w := late.Welcomes()[0]; w.State == nil || *w.State != want || w.Pin == nil || *w.Pin != pin {
			t.Fatalf("welcome on comet %d: state %+v, pin %+v; want %+v and %+v", i, w.State, w.Pin, want, pin)
		}
	}
}
