package route

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

var (
	registerScript    = script("register")
	unregisterScript  = script("unregister")
	removeCometScript = script("remove_comet")
	// removeDeadIndexScript is RemoveDeadComet's last step.
	removeDeadIndexScript = script("remove_dead_index")
)

// Conn is one viewer connection as the registry knows it.
type Conn struct {
	ID    string // connection id, unique across comets
	Room  string
	User  string // empty for an anonymous viewer
	Comet string // id of the comet holding the socket
}

func (c Conn) check() error {
	if err := checkIDs("conn.id", c.ID, "conn.room", c.Room, "conn.comet", c.Comet); err != nil {
		return err
	}
	if c.User != "" {
		return danmaku.CheckID("conn.user", c.User)
	}
	return nil
}

// cometIndexValue is what comet:connections:{comet} stores per connection:
// enough to undo the registration without the comet's memory.
func (c Conn) cometIndexValue() string { return c.Room + ":" + c.User }

// Register records c in the room (atomically with the room's per-comet
// count), in connection:info, in user:online and in the comet's own index.
// It is one pipelined round trip on a single server, two on a cluster (the
// index first, see phased), and safe to repeat.
//
// A user banned from the room (Ban) is not added to it: Register returns a
// *BanError. The connection's own records were written by the same call;
// the caller removes them with Unregister, as for any connection that goes
// away.
func (s *Store) Register(ctx context.Context, c Conn) error {
	regs, err := s.RegisterMany(ctx, []Conn{c})
	if err != nil {
		return err
	}
	return regs[0].Err
}

// Registration is the outcome of one connection of RegisterMany.
type Registration struct {
	// Err is nil, or a *BanError when the user is banned from the room.
	Err error
	// Online is the room's viewer count over all comets after the call.
	Online int64
}

// RegisterMany registers every connection of conns as Register does, in
// the round trips one Register takes, and reads each room's viewer count
// after them: a crowd joining at once costs one round trip per batch, not
// one per viewer. The result has one entry per connection, in order; an
// error means Redis did not answer, and any part of the batch may have
// been written (see Register).
func (s *Store) RegisterMany(ctx context.Context, conns []Conn) ([]Registration, error) {
	for _, c := range conns {
		if err := c.check(); err != nil {
			return nil, err
		}
	}
	regs := make([]*redis.Cmd, len(conns))
	var counts map[string]*redis.IntCmd
	err := s.phased(ctx, "register", func(p redis.Pipeliner) {
		index := map[string][]any{}
		for _, c := range conns {
			index[c.Comet] = append(index[c.Comet], c.ID, c.cometIndexValue())
		}
		for comet, fields := range index {
			p.HSet(ctx, cometConnectionsKey(comet), fields...)
		}
	}, func(p redis.Pipeliner) {
		counts = map[string]*redis.IntCmd{} // a retry (NOSCRIPT) fills again
		for i, c := range conns {
			p.HSet(ctx, connectionInfoKey(c.ID), "comet_id", c.Comet, "user_id", c.User, "room_id", c.Room)
			keys := []string{roomConnectionsKey(c.Room), roomCometsKey(c.Room)}
			if c.User != "" {
				p.HSet(ctx, userOnlineKey(c.User), c.ID, c.Comet)
				keys = append(keys, banKey(c.Room, c.User))
			}
			regs[i] = registerScript.EvalSha(ctx, p, keys, c.ID, c.Comet)
		}
		for _, c := range conns {
			if counts[c.Room] == nil {
				counts[c.Room] = p.SCard(ctx, roomConnectionsKey(c.Room))
			}
		}
	}, nil)
	if err != nil {
		return nil, err
	}
	out := make([]Registration, len(conns))
	for i, c := range conns {
		out[i].Online = counts[c.Room].Val()
		if n, _ := regs[i].Int64(); n < 0 {
			out[i].Err = &BanError{Room: c.Room, User: c.User, Left: time.Duration(-1-n) * time.Millisecond}
		}
	}
	return out, nil
}

// Unregister removes every trace of c. It is one pipelined round trip on a
// single server, two on a cluster (the index last, see phased), and safe to
// repeat.
func (s *Store) Unregister(ctx context.Context, c Conn) error {
	if err := c.check(); err != nil {
		return err
	}
	return s.phased(ctx, "unregister", nil, func(p redis.Pipeliner) {
		unregisterScript.EvalSha(ctx, p, []string{roomConnectionsKey(c.Room), roomCometsKey(c.Room)}, c.Comet, c.ID)
		p.Del(ctx, connectionInfoKey(c.ID))
		if c.User != "" {
			p.HDel(ctx, userOnlineKey(c.User), c.ID)
		}
	}, func(p redis.Pipeliner) {
		p.HDel(ctx, cometConnectionsKey(c.Comet), c.ID)
	})
}

// phased runs a change of the registry in three phases: index adds the
// comet index entries, records writes or removes the room membership and
// the per-connection and per-user records, unindex removes index entries.
// The comet's index so lists a connection before any other record of it is
// written and until every other record of it is removed: a change that
// fails half way (a master lost mid-call) leaves only traces the index
// lists, which Reconcile and RemoveComet find. On a single server one
// pipeline keeps that order (commands run in the order sent). A cluster
// client sends the commands of each node concurrently, so there each phase
// given is a round trip of its own, run only when the one before
// succeeded. Any phase may be nil.
func (s *Store) phased(ctx context.Context, op string, index, records, unindex func(p redis.Pipeliner)) error {
	phases := []func(redis.Pipeliner){index, records, unindex}
	if !s.cluster() {
		_, err := s.execPipe(ctx, op, func(p redis.Pipeliner) {
			for _, fill := range phases {
				if fill != nil {
					fill(p)
				}
			}
		})
		return err
	}
	for _, fill := range phases {
		if fill == nil {
			continue
		}
		if _, err := s.execPipe(ctx, op, fill); err != nil {
			return err
		}
	}
	return nil
}

// Online returns the number of viewers of room over all comets.
func (s *Store) Online(ctx context.Context, room string) (int64, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return 0, err
	}
	n, err := s.rdb.SCard(ctx, roomConnectionsKey(room)).Result()
	return n, wrap("online", err)
}

// removeBatch bounds the arguments of one script call when a whole comet is
// removed.
const removeBatch = 500

// RemoveDeadComet is RemoveComet for a comet DeadComets listed, which may
// renew its lease (and register its viewers again) while it runs: it checks
// the lease before each room and before the last step, stops when the lease
// is back and then reports renewed, leaving the lease, the index and the
// routes written since. What it removed before is written again by the
// comet's next renewal (its heartbeat finds routes lost).
func (s *Store) RemoveDeadComet(ctx context.Context, comet string) (removed int, renewed bool, err error) {
	return s.removeComet(ctx, comet, true)
}

// RemoveComet deletes every route of comet: its connections in every room,
// their info and user entries, its field in each room's counts, its index
// and its lease. Used for a comet's own graceful shutdown and when a comet
// restarts with the same id. Returns the number of connections removed.
func (s *Store) RemoveComet(ctx context.Context, comet string) (int, error) {
	n, _, err := s.removeComet(ctx, comet, false)
	return n, err
}

// removeComet is RemoveComet, or RemoveDeadComet when dead.
func (s *Store) removeComet(ctx context.Context, comet string, dead bool) (removed int, renewed bool, err error) {
	if err := danmaku.CheckID("comet", comet); err != nil {
		return 0, false, err
	}
	leaseBack := func() (bool, error) {
		n, err := s.rdb.Exists(ctx, cometKey(comet)).Result()
		return n > 0, wrap("remove comet", err)
	}
	idx, err := s.rdb.HGetAll(ctx, cometConnectionsKey(comet)).Result()
	if err != nil {
		return 0, false, wrap("remove comet", err)
	}
	byRoom := map[string][]Conn{}
	for id, v := range idx {
		room, user, _ := strings.Cut(v, ":")
		byRoom[room] = append(byRoom[room], Conn{ID: id, Room: room, User: user, Comet: comet})
	}
	for room, conns := range byRoom {
		if dead {
			if back, err := leaseBack(); err != nil || back {
				return removed, back, err
			}
		}
		n, err := s.removeRoom(ctx, comet, room, conns)
		removed += n
		if err != nil {
			return removed, false, err
		}
	}
	if dead {
		renewed, err := s.removeDeadIndex(ctx, comet)
		return removed, renewed, err
	}
	_, err = s.execPipe(ctx, "remove comet", func(p redis.Pipeliner) {
		p.Del(ctx, cometConnectionsKey(comet))
		p.Del(ctx, cometKey(comet))
		p.SRem(ctx, cometsIndexKey, comet)
	})
	return removed, false, err
}

// removeRoom removes conns, comet's connections in room, removeBatch at a
// time: the room's set and count in one script, the records in the same
// pipeline, the index entries after. It returns how many were removed.
func (s *Store) removeRoom(ctx context.Context, comet, room string, conns []Conn) (removed int, err error) {
	for len(conns) > 0 {
		chunk := conns[:min(len(conns), removeBatch)]
		conns = conns[len(chunk):]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, comet)
		for _, c := range chunk {
			args = append(args, c.ID)
		}
		var script *redis.Cmd
		err := s.phased(ctx, "remove comet", nil, func(p redis.Pipeliner) {
			script = removeCometScript.EvalSha(ctx, p, []string{roomConnectionsKey(room), roomCometsKey(room)}, args...)
			for _, c := range chunk {
				p.Del(ctx, connectionInfoKey(c.ID))
				if c.User != "" {
					p.HDel(ctx, userOnlineKey(c.User), c.ID)
				}
			}
		}, func(p redis.Pipeliner) {
			for _, c := range chunk {
				p.HDel(ctx, cometConnectionsKey(comet), c.ID)
			}
		})
		if err != nil {
			return removed, err
		}
		n, _ := script.Int()
		removed += n
	}
	return removed, nil
}

// removeDeadIndex deletes a dead comet's index once its rooms are done,
// unless its lease came back meanwhile (renewed), and then drops it from
// comets:index.
func (s *Store) removeDeadIndex(ctx context.Context, comet string) (renewed bool, err error) {
	var last *redis.Cmd
	if _, err := s.execPipe(ctx, "remove comet", func(p redis.Pipeliner) {
		last = removeDeadIndexScript.EvalSha(ctx, p, []string{cometKey(comet), cometConnectionsKey(comet)})
	}); err != nil {
		return false, err
	}
	if n, _ := last.Int(); n == 0 {
		return true, nil
	}
	return false, wrap("remove comet", s.rdb.SRem(ctx, cometsIndexKey, comet).Err())
}
