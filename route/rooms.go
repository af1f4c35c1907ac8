package route

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

// RoomLoad is a room as the moderator console lists it: its viewers and
// where its timeline stands. The rate of messages is the change of
// Head.Last between two reads of the same epoch.
type RoomLoad struct {
	Room   string
	Online int64
	Head   Head
}

// scanBudget bounds the SCAN calls ActiveRooms makes per Redis node (of
// scanCount keys each), so a large keyspace costs a bounded read.
const scanBudget = 200

// ActiveRooms lists up to max rooms that have viewers on some comet: the
// rooms whose room:comets:{room} exists, found by SCAN on every master
// (at most scanBudget calls each). It walks the keyspace, so it serves the
// admin console, never a hot path; the order is Redis's.
func (s *Store) ActiveRooms(ctx context.Context, max int) ([]string, error) {
	prefix := strings.TrimSuffix(roomCometsKey(""), "}")
	var (
		mu    sync.Mutex
		rooms []string
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for range scanBudget {
			keys, next, err := c.ScanType(ctx, cursor, roomCometsKey("*"), scanCount, "hash").Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				if room, ok := strings.CutPrefix(k, prefix); ok && len(rooms) < max {
					rooms = append(rooms, strings.TrimSuffix(room, "}"))
				}
			}
			full := len(rooms) >= max
			mu.Unlock()
			if cursor = next; cursor == 0 || full {
				return nil
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.rdb)
	}
	if err != nil {
		return nil, wrap("active rooms", err)
	}
	slices.Sort(rooms)
	return slices.Compact(rooms), nil
}

// RoomLoads reads the viewers and the timeline head of each room in one
// pipeline (a SCARD and an HMGET per room), in the order given.
func (s *Store) RoomLoads(ctx context.Context, rooms []string) ([]RoomLoad, error) {
	for _, r := range rooms {
		if err := danmaku.CheckID("room", r); err != nil {
			return nil, err
		}
	}
	if len(rooms) == 0 {
		return nil, nil
	}
	cmds, err := s.execPipe(ctx, "room loads", func(p redis.Pipeliner) {
		for _, r := range rooms {
			p.SCard(ctx, roomConnectionsKey(r))
			p.HMGet(ctx, timelineKey(r), "epoch", "seq")
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]RoomLoad, len(rooms))
	for i, r := range rooms {
		out[i].Room = r
		out[i].Online = cmds[2*i].(*redis.IntCmd).Val()
		if vals := cmds[2*i+1].(*redis.SliceCmd).Val(); len(vals) == 2 {
			out[i].Head.Epoch, _ = vals[0].(string)
			seq, _ := vals[1].(string)
			out[i].Head.Last, _ = strconv.ParseInt(seq, 10, 64)
		}
	}
	return out, nil
}
