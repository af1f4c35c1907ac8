package route_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/route"
)

// The registry read back key by key, as the tests check it: what Redis
// holds, read without the package's scripts.

// roomComets reads room:comets:{room}, the comets holding viewers of room
// with their counts (BeginBroadcast's route lookup), leaving out counts
// that are not positive.
func roomComets(tb testing.TB, rdb redis.UniversalClient, room string) map[string]int64 {
	tb.Helper()
	m, err := rdb.HGetAll(context.Background(), "room:comets:{"+room+"}").Result()
	if err != nil {
		tb.Fatalf("room comets of %s: %v", room, err)
	}
	out := make(map[string]int64, len(m))
	for comet, v := range m {
		if n, _ := strconv.ParseInt(v, 10, 64); n > 0 {
			out[comet] = n
		}
	}
	return out
}

// seedRoutes is the lookup without the room:comets index: the room's
// connection set, then every connection's info hash (pipelined), grouped
// by comet. N+1 commands for N viewers.
func seedRoutes(tb testing.TB, rdb redis.UniversalClient, room string) map[string][]string {
	tb.Helper()
	ctx := context.Background()
	conns, err := rdb.SMembers(ctx, "room:connections:{"+room+"}").Result()
	if err != nil {
		tb.Fatalf("members of %s: %v", room, err)
	}
	p := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(conns))
	for i, id := range conns {
		cmds[i] = p.HGetAll(ctx, "connection:info:{"+id+"}")
	}
	if len(conns) > 0 {
		if _, err := p.Exec(ctx); err != nil {
			tb.Fatalf("connection infos of %s: %v", room, err)
		}
	}
	out := map[string][]string{}
	for i, c := range cmds {
		if comet := c.Val()["comet_id"]; comet != "" {
			out[comet] = append(out[comet], conns[i])
		}
	}
	return out
}

// connectionInfo reads connection:info:{id}; ok is false when there is none.
func connectionInfo(tb testing.TB, rdb redis.UniversalClient, id string) (c route.Conn, ok bool) {
	tb.Helper()
	m, err := rdb.HGetAll(context.Background(), "connection:info:{"+id+"}").Result()
	if err != nil {
		tb.Fatalf("connection info of %s: %v", id, err)
	}
	if len(m) == 0 {
		return route.Conn{}, false
	}
	return route.Conn{ID: id, Room: m["room_id"], User: m["user_id"], Comet: m["comet_id"]}, true
}
