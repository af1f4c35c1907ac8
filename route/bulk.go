package route

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"
)

// opKind is what one bulk operation does to a connection of a comet.
type opKind uint8

const (
	// opWrite adds the connection to its room if missing and writes its
	// connection:info, user:online and comet index entries.
	opWrite opKind = iota
	// opCheck adds the connection to its room if missing and writes
	// nothing else; apply reports those it had to add.
	opCheck
	// opDrop removes the connection from its room and deletes its
	// connection:info, user:online and comet index entries.
	opDrop
	// opLeave removes an old placement of a connection that an opWrite
	// registers anew: its membership of c.Room unless empty, c.User's
	// user:online field unless empty. The info and index entries are
	// overwritten by the opWrite, not removed.
	opLeave
)

type op struct {
	kind opKind
	c    Conn
}

// applied is the outcome of apply.
type applied struct {
	added int    // ids the room scripts found missing and added
	readd []Conn // the opCheck connections among them
}

// apply runs ops in pipelines of at most sliceSize operations. The
// operations of one room within a pipeline are one room_sync call, so each
// room's set and counts change atomically; the per-connection, per-user and
// comet index writes go in the same pipeline (on a cluster: index entries
// added before, removed after, see phased).
func (s *Store) apply(ctx context.Context, name, comet string, ops []op) (applied, error) {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b op) int { return cmp.Compare(a.c.Room, b.c.Room) })
	var out applied
	for chunk := range slices.Chunk(ops, sliceSize) {
		if err := s.applySlice(ctx, name, comet, chunk, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// roomCall is one room_sync call of a pipeline.
type roomCall struct {
	room string
	args []any // comet, number of ids to add, ids to add, ids to remove
	cmd  *redis.Cmd
}

// roomCalls groups ops, sorted by room, into one call per room. Operations
// without a room have nothing to do there.
func roomCalls(comet string, ops []op) []*roomCall {
	var calls []*roomCall
	var adds, removes []any
	flush := func(room string) {
		if room == "" || len(adds)+len(removes) == 0 {
			return
		}
		args := make([]any, 0, 2+len(adds)+len(removes))
		args = append(append(append(args, comet, len(adds)), adds...), removes...)
		calls = append(calls, &roomCall{room: room, args: args})
		adds, removes = adds[:0], removes[:0]
	}
	cur := ""
	for _, o := range ops {
		if o.c.Room != cur {
			flush(cur)
			cur = o.c.Room
		}
		switch o.kind {
		case opWrite, opCheck:
			adds = append(adds, o.c.ID)
		default:
			removes = append(removes, o.c.ID)
		}
	}
	flush(cur)
	return calls
}

func (s *Store) applySlice(ctx context.Context, name, comet string, ops []op, out *applied) error {
	calls := roomCalls(comet, ops)
	var index []any
	var unindex []string
	for _, o := range ops {
		switch o.kind {
		case opWrite:
			index = append(index, o.c.ID, o.c.cometIndexValue())
		case opDrop:
			unindex = append(unindex, o.c.ID)
		}
	}
	var addIndex, dropIndex func(p redis.Pipeliner)
	if len(index) > 0 {
		addIndex = func(p redis.Pipeliner) { p.HSet(ctx, cometConnectionsKey(comet), index...) }
	}
	if len(unindex) > 0 {
		dropIndex = func(p redis.Pipeliner) { p.HDel(ctx, cometConnectionsKey(comet), unindex...) }
	}
	err := s.phased(ctx, name, addIndex, func(p redis.Pipeliner) {
		for _, rc := range calls {
			rc.cmd = roomSyncScript.EvalSha(ctx, p, []string{roomConnectionsKey(rc.room), roomCometsKey(rc.room)}, rc.args...)
		}
		for _, o := range ops {
			writeRecords(ctx, p, o)
		}
	}, dropIndex)
	if err != nil {
		return err
	}
	added := map[string]struct{}{}
	for _, rc := range calls {
		res, _ := rc.cmd.Slice()
		if len(res) == 0 {
			continue
		}
		ids, _ := res[0].([]any)
		for _, id := range ids {
			if s, ok := id.(string); ok {
				added[s] = struct{}{}
			}
		}
	}
	out.added += len(added)
	for _, o := range ops {
		if _, ok := added[o.c.ID]; ok && o.kind == opCheck {
			out.readd = append(out.readd, o.c)
		}
	}
	return nil
}

// writeRecords queues the per-connection and per-user commands of o.
func writeRecords(ctx context.Context, p redis.Pipeliner, o op) {
	c := o.c
	switch o.kind {
	case opWrite:
		p.HSet(ctx, connectionInfoKey(c.ID), "comet_id", c.Comet, "user_id", c.User, "room_id", c.Room)
		if c.User != "" {
			p.HSet(ctx, userOnlineKey(c.User), c.ID, c.Comet)
		}
	case opDrop:
		p.Del(ctx, connectionInfoKey(c.ID))
		if c.User != "" {
			p.HDel(ctx, userOnlineKey(c.User), c.ID)
		}
	case opLeave:
		if c.User != "" {
			p.HDel(ctx, userOnlineKey(c.User), c.ID)
		}
	}
}

// settleCounts reads the comet's count in every room of expect, sliceSize
// rooms per pipeline, and settles the rooms where it differs from the
// expected number. Returns the members removed and the rooms corrected.
func (s *Store) settleCounts(ctx context.Context, comet string, expect map[string]int64, held []Conn) (int, int, error) {
	var wrong []string
	for chunk := range slices.Chunk(slices.Sorted(maps.Keys(expect)), sliceSize) {
		cmds, err := s.execPipe(ctx, "reconcile counts", func(p redis.Pipeliner) {
			for _, r := range chunk {
				p.HGet(ctx, roomCometsKey(r), comet)
			}
		})
		if err != nil {
			return 0, 0, err
		}
		for i, c := range cmds {
			n, _ := c.(*redis.StringCmd).Int64()
			if n != expect[chunk[i]] {
				wrong = append(wrong, chunk[i])
			}
		}
	}
	if len(wrong) == 0 {
		return 0, 0, nil
	}
	heldIDs := make(map[string]struct{}, len(held))
	for _, c := range held {
		heldIDs[c.ID] = struct{}{}
	}
	removed := 0
	for i, room := range wrong {
		n, err := s.settleRoom(ctx, comet, room, expect[room], heldIDs)
		removed += n
		if err != nil {
			return removed, i, err
		}
	}
	return removed, len(wrong), nil
}

// settleRoom removes from room the members whose connection:info names
// comet but that comet does not hold, then sets comet's count to n, the
// number of connections it holds there. Members without connection:info are
// left alone: another comet's registration may be on its way. Returns the
// members removed.
func (s *Store) settleRoom(ctx context.Context, comet, room string, n int64, held map[string]struct{}) (int, error) {
	others := map[string]struct{}{}
	var cursor uint64
	for {
		ids, next, err := s.rdb.SScan(ctx, roomConnectionsKey(room), cursor, "", scanCount).Result()
		if err != nil {
			return 0, wrap("reconcile room", err)
		}
		for _, id := range ids {
			if _, ok := held[id]; !ok {
				others[id] = struct{}{}
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	var ghosts []op
	for chunk := range slices.Chunk(slices.Collect(maps.Keys(others)), sliceSize) {
		cmds, err := s.execPipe(ctx, "reconcile room", func(p redis.Pipeliner) {
			for _, id := range chunk {
				p.HMGet(ctx, connectionInfoKey(id), "comet_id", "user_id")
			}
		})
		if err != nil {
			return 0, err
		}
		for i, c := range cmds {
			v := c.(*redis.SliceCmd).Val()
			if len(v) == 2 && v[0] == comet {
				user, _ := v[1].(string)
				ghosts = append(ghosts, op{kind: opDrop, c: Conn{ID: chunk[i], Room: room, User: user, Comet: comet}})
			}
		}
	}
	if _, err := s.apply(ctx, "reconcile room", comet, ghosts); err != nil {
		return 0, err
	}
	_, err := s.execPipe(ctx, "reconcile room", func(p redis.Pipeliner) {
		if n > 0 {
			p.HSet(ctx, roomCometsKey(room), comet, n)
		} else {
			p.HDel(ctx, roomCometsKey(room), comet)
		}
	})
	return len(ghosts), err
}
