package route

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

var (
	heartbeatScript = script("heartbeat")
	roomSyncScript  = script("room_sync")
)

// sliceSize bounds the connections of one pipeline (and the ids of one
// script call) in RegisterAll and Reconcile, and the rooms of one count
// check: a large comet is repaired in a series of bounded round trips, none
// of which holds Redis for long.
const sliceSize = 500

// scanCount is the COUNT hint of the scans that read a comet's index and,
// when a count is wrong, a room's members.
const scanCount = 2000

// LeaseState is what Heartbeat found in Redis.
type LeaseState struct {
	// Lost is true when the lease was missing or carried another start
	// time: Redis lost this comet's state (a restart without persistence, a
	// failover to a replica behind, a lease that expired and whose routes a
	// janitor may have removed) or another process uses the same id. The
	// comet re-registers everything it holds. The first Heartbeat of a
	// process reports Lost too: there was nothing to lose.
	Lost bool
	// Registered is the number of connections the comet's index lists, for
	// comparison with the number it holds.
	Registered int64
}

// Heartbeat creates or renews c's lease (comet:{cometId}, TTL ttl; the comet is
// listed in the discovery index) and, in the same atomic script,
// reports whether Redis still held this process's lease and how many
// connections it lists for the comet. One round trip.
func (s *Store) Heartbeat(ctx context.Context, c CometInfo, ttl time.Duration) (LeaseState, error) {
	if err := danmaku.CheckID("comet", c.ID); err != nil {
		return LeaseState{}, err
	}
	if c.Addr == "" {
		return LeaseState{}, danmaku.Errorf(danmaku.EINVALID, "comet.addr", "must not be empty")
	}
	if ttl < time.Millisecond {
		return LeaseState{}, danmaku.Errorf(danmaku.EINVALID, "ttl", "must be at least 1ms")
	}
	var cmd *redis.Cmd
	_, err := s.execPipe(ctx, "heartbeat", func(p redis.Pipeliner) {
		cmd = heartbeatScript.EvalSha(ctx, p, []string{cometKey(c.ID), cometConnectionsKey(c.ID)},
			c.Addr, strconv.FormatInt(c.Started.UnixMilli(), 10), ttl.Milliseconds())
		p.SAdd(ctx, cometsIndexKey, c.ID)
	})
	if err != nil {
		return LeaseState{}, err
	}
	v, err := cmd.Int64Slice()
	if err != nil || len(v) != 2 {
		return LeaseState{}, danmaku.Errorf(danmaku.EINTERNAL, "heartbeat", "unexpected reply %v", cmd.Val())
	}
	return LeaseState{Lost: v[0] == 0, Registered: v[1]}, nil
}

// RegisterAll registers conns of comet in bulk, as Register does one by one,
// in pipelines of at most sliceSize connections: one script per room and
// slice, the comet's index in one HSET per slice, the per-connection and
// per-user hashes in the same pipeline. It is idempotent: connections
// already registered are not counted twice. Every conn must name comet.
// It returns the number of connections that were missing from their room.
func (s *Store) RegisterAll(ctx context.Context, comet string, conns []Conn) (int, error) {
	if err := checkHeld(comet, conns); err != nil {
		return 0, err
	}
	seen := make(map[string]struct{}, len(conns))
	ops := make([]op, 0, len(conns))
	for _, c := range conns {
		if _, dup := seen[c.ID]; !dup {
			seen[c.ID] = struct{}{}
			ops = append(ops, op{kind: opWrite, c: c})
		}
	}
	res, err := s.apply(ctx, "register all", comet, ops)
	return res.added, err
}

// Repair is what Reconcile changed.
type Repair struct {
	Added     int // held connections Redis lacked (in the comet's index or the room), now registered
	Removed   int // connections the comet does not hold, removed with all their records
	Corrected int // rooms whose count for the comet disagreed with its members, now set right
}

// Changed reports whether Reconcile had anything to fix.
func (r Repair) Changed() bool { return r != Repair{} }

// Reconcile makes Redis agree with the connections comet holds. Afterwards
// comet:connections:{comet} lists exactly held; each held connection is a
// member of its room with its connection:info and user:online entries; the
// connections the index listed but comet does not hold are gone from their
// room, connection:info and user:online; and the comet's count in each of
// those rooms equals its members there, members credited to it that it does
// not hold (found through connection:info) removed.
//
// Work is bounded: the index is read by HSCAN, held connections are checked
// and written in pipelines of sliceSize, and counts are read in one pipeline
// per sliceSize rooms: 20,000 connections cost about 50 round trips.
// Records of a connection already in the index are rewritten only when its
// room lost it.
//
// The caller must not register or unregister comet's connections while
// Reconcile runs (held is a snapshot): a join or a leave in between could
// be undone. Whatever Reconcile writes is also in the comet's index, so a
// late write is taken back by the next call.
func (s *Store) Reconcile(ctx context.Context, comet string, held []Conn) (Repair, error) {
	var rep Repair
	if err := checkHeld(comet, held); err != nil {
		return rep, err
	}
	index, err := s.cometIndex(ctx, comet)
	if err != nil {
		return rep, err
	}
	ops, expect := diffIndex(comet, held, index)
	for _, o := range ops {
		switch o.kind {
		case opWrite:
			rep.Added++
		case opDrop:
			rep.Removed++
		}
	}
	res, err := s.apply(ctx, "reconcile", comet, ops)
	if err != nil {
		return rep, err
	}
	if len(res.readd) > 0 {
		// Their room had lost them: their other records may be gone too.
		rewrite := make([]op, len(res.readd))
		for i, c := range res.readd {
			rewrite[i] = op{kind: opWrite, c: c}
		}
		if _, err := s.apply(ctx, "reconcile", comet, rewrite); err != nil {
			return rep, err
		}
		rep.Added += len(res.readd)
	}
	ghosts, corrected, err := s.settleCounts(ctx, comet, expect, held)
	rep.Removed += ghosts
	rep.Corrected += corrected
	return rep, err
}

// checkHeld validates comet and every connection, which must belong to it.
func checkHeld(comet string, conns []Conn) error {
	if err := danmaku.CheckID("comet", comet); err != nil {
		return err
	}
	for _, c := range conns {
		if err := c.check(); err != nil {
			return err
		}
		if c.Comet != comet {
			return danmaku.Errorf(danmaku.EINVALID, "conn.comet", "connection %s belongs to %s, not %s", c.ID, c.Comet, comet)
		}
	}
	return nil
}

// cometIndex reads comet:connections:{comet} by HSCAN, scanCount fields at a
// time.
func (s *Store) cometIndex(ctx context.Context, comet string) (map[string]string, error) {
	index := map[string]string{}
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, cometConnectionsKey(comet), cursor, "", scanCount).Result()
		if err != nil {
			return nil, wrap("comet index", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			index[kv[i]] = kv[i+1]
		}
		if cursor = next; cursor == 0 {
			return index, nil
		}
	}
}

// fromIndex rebuilds a connection from its comet index entry.
func fromIndex(comet, id, v string) Conn {
	room, user, _ := strings.Cut(v, ":")
	return Conn{ID: id, Room: room, User: user, Comet: comet}
}

// diffIndex compares what comet holds with its index and returns the
// operations that make Redis agree, with the expected count of the comet in
// every room involved (zero for rooms it no longer holds anyone in).
func diffIndex(comet string, held []Conn, index map[string]string) ([]op, map[string]int64) {
	ops := make([]op, 0, len(held))
	expect := map[string]int64{}
	seen := make(map[string]struct{}, len(held))
	for _, c := range held {
		if _, dup := seen[c.ID]; dup {
			continue
		}
		seen[c.ID] = struct{}{}
		expect[c.Room]++
		v, ok := index[c.ID]
		switch {
		case !ok:
			ops = append(ops, op{kind: opWrite, c: c})
		case v == c.cometIndexValue():
			ops = append(ops, op{kind: opCheck, c: c})
		default: // registered with another room or user
			old := fromIndex(comet, c.ID, v)
			if old.Room == c.Room {
				old.Room = ""
			} else if old.Room != "" {
				expect[old.Room] += 0
			}
			if old.User == c.User {
				old.User = ""
			}
			ops = append(ops, op{kind: opLeave, c: old}, op{kind: opWrite, c: c})
		}
	}
	for id, v := range index {
		if _, ok := seen[id]; !ok {
			old := fromIndex(comet, id, v)
			if old.Room != "" {
				expect[old.Room] += 0
			}
			ops = append(ops, op{kind: opDrop, c: old})
		}
	}
	return ops, expect
}
