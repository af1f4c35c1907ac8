package route

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

// ActiveRooms finds the rooms with viewers on a single server and on every
// master of a cluster; RoomLoads reads their counts and heads, a room
// without viewers or timeline as zeros.
func TestActiveRoomsAndLoads(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		s, ctx := New(rdb), context.Background()
		comet := testkit.Uniq("comet")
		rooms := []string{testkit.Uniq("ra"), testkit.Uniq("rb"), testkit.Uniq("rc"), testkit.Uniq("rd")}
		for i, room := range rooms {
			for range i + 1 {
				if err := s.Register(ctx, Conn{ID: testkit.Uniq("c"), Room: room, Comet: comet}); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Cleanup(func() { s.RemoveComet(ctx, comet) })
		active, err := s.ActiveRooms(ctx, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, room := range rooms {
			if !slices.Contains(active, room) {
				t.Fatalf("active rooms %v lack %s", active, room)
			}
		}
		if few, err := s.ActiveRooms(ctx, 2); err != nil || len(few) > 2 {
			t.Fatalf("ActiveRooms(2) = %v, %v", few, err)
		}
		idle := testkit.Uniq("idle")
		loads, err := s.RoomLoads(ctx, append(rooms, idle))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range loads {
			want := int64(i + 1)
			if i == len(rooms) {
				want = 0
			}
			if l.Online != want || l.Head != (Head{}) {
				t.Errorf("load %d: %+v, want %d viewers and no timeline", i, l, want)
			}
		}
		if _, err := s.RoomLoads(ctx, []string{"bad{room"}); err == nil {
			t.Fatal("an invalid room id reached Redis")
		}
	})
}
