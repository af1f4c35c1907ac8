package route

import (
	"context"
	"embed"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

// The guards one at a time, the registry read back and the N+1 route lookup:
// what BeginBroadcast and EndBroadcast do in two round trips, split into
// separate calls so the tests can check each key's TTL and contention
// alone, and the benchmarks can price the combined scripts against them.
// None of it runs in production.

// Guard durations: the production defaults of job.Config.
const (
	DefaultProcessedTTL = 60 * time.Second
	DefaultCooldown     = time.Second
	DefaultLockTTL      = 5 * time.Second
)

//go:embed testdata/*.lua
var testLuaFS embed.FS

func testScript(name string) *redis.Script {
	b, err := testLuaFS.ReadFile("testdata/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(b))
}

var (
	claimScript         = testScript("claim")
	releaseClaimsScript = testScript("release_claims")
	cooldownScript      = testScript("cooldown")
)

// ErrLocked reports that AcquireLock found the room's lock held by somebody
// else.
var ErrLocked = &danmaku.Error{Code: danmaku.ECONFLICT, Field: "lock", Message: "broadcast lock held by another owner"}

// Claim marks the message ids of room as being delivered by owner, for at
// most claimTTL, in one round trip: the claim half of BeginBroadcast. The
// result has one state per id.
func (s *Store) Claim(ctx context.Context, room string, ids []string, owner string, claimTTL time.Duration) ([]ClaimState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys, err := processedKeys(room, ids)
	if err != nil {
		return nil, err
	}
	if err := danmaku.CheckID("owner", owner); err != nil {
		return nil, err
	}
	res, err := claimScript.Run(ctx, s.rdb, keys, owner, claimTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, wrap("claim", err)
	}
	out := make([]ClaimState, len(res))
	for i, v := range res {
		out[i] = ClaimState(v)
	}
	return out, nil
}

// MarkProcessed records the ids of room as delivered for ttl: the marking
// half of EndBroadcast.
func (s *Store) MarkProcessed(ctx context.Context, room string, ids []string, ttl time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	keys, err := processedKeys(room, ids)
	if err != nil {
		return err
	}
	_, err = s.execPipe(ctx, "mark processed", func(p redis.Pipeliner) {
		for _, k := range keys {
			p.Set(ctx, k, "done", ttl)
		}
	})
	return err
}

// ReleaseClaims drops owner's claims on ids; claims of other owners and
// processed marks are left alone.
func (s *Store) ReleaseClaims(ctx context.Context, room string, ids []string, owner string) error {
	if len(ids) == 0 {
		return nil
	}
	keys, err := processedKeys(room, ids)
	if err != nil {
		return err
	}
	return wrap("release claims", releaseClaimsScript.Run(ctx, s.rdb, keys, owner).Err())
}

// Cooldown opens room's window of length window if none is running: the
// cooldown half of BeginBroadcast. It returns ok when the caller opened it,
// otherwise how long the running window still lasts.
func (s *Store) Cooldown(ctx context.Context, room string, window time.Duration) (ok bool, remaining time.Duration, err error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return false, 0, err
	}
	ms, err := cooldownScript.Run(ctx, s.rdb, []string{cooldownKey(room)}, max(window.Milliseconds(), 1)).Int64()
	if err != nil {
		return false, 0, wrap("cooldown", err)
	}
	if ms == 0 {
		return true, window, nil
	}
	return false, time.Duration(ms) * time.Millisecond, nil
}

// AcquireLock takes room's broadcast lock for ttl (SET NX PX with a fresh
// token); ErrLocked when somebody else holds it.
func (s *Store) AcquireLock(ctx context.Context, room string, ttl time.Duration) (*Lock, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	l := &Lock{Room: room, Token: newToken()}
	err := s.rdb.SetArgs(ctx, lockKey(room), l.Token, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	if errors.Is(err, redis.Nil) {
		return nil, ErrLocked
	}
	if err != nil {
		return nil, wrap("acquire lock", err)
	}
	return l, nil
}

// RoomComets reads room:comets:{room}, the comets holding viewers of room
// with their viewer counts, as BeginBroadcast reads it: one HGETALL whatever
// the number of viewers.
func (s *Store) RoomComets(ctx context.Context, room string) (map[string]int64, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	m, err := s.rdb.HGetAll(ctx, roomCometsKey(room)).Result()
	if err != nil {
		return nil, wrap("room comets", err)
	}
	out := make(map[string]int64, len(m))
	for comet, v := range m {
		if n, _ := strconv.ParseInt(v, 10, 64); n > 0 {
			out[comet] = n
		}
	}
	return out, nil
}

// SeedRoutes is the lookup without the room:comets index: the room's
// connection set, then every connection's info hash (pipelined), grouped by
// comet. N+1 commands for N viewers; the tests check the index against it
// and the benchmark prices it.
func (s *Store) SeedRoutes(ctx context.Context, room string) (map[string][]string, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	conns, err := s.rdb.SMembers(ctx, roomConnectionsKey(room)).Result()
	if err != nil {
		return nil, wrap("seed routes", err)
	}
	out := map[string][]string{}
	if len(conns) == 0 {
		return out, nil
	}
	cmds, err := s.execPipe(ctx, "seed routes", func(p redis.Pipeliner) {
		for _, id := range conns {
			p.HGetAll(ctx, connectionInfoKey(id))
		}
	})
	if err != nil {
		return nil, err
	}
	for i, c := range cmds {
		comet := c.(*redis.MapStringStringCmd).Val()["comet_id"]
		if comet != "" {
			out[comet] = append(out[comet], conns[i])
		}
	}
	return out, nil
}

// ConnectionInfo returns the registry's record of one connection;
// ENOTFOUND when there is none.
func (s *Store) ConnectionInfo(ctx context.Context, connID string) (Conn, error) {
	if err := danmaku.CheckID("conn", connID); err != nil {
		return Conn{}, err
	}
	m, err := s.rdb.HGetAll(ctx, connectionInfoKey(connID)).Result()
	if err != nil {
		return Conn{}, wrap("connection info", err)
	}
	if len(m) == 0 {
		return Conn{}, danmaku.Errorf(danmaku.ENOTFOUND, "conn", "connection %s not registered", connID)
	}
	return Conn{ID: connID, Room: m["room_id"], User: m["user_id"], Comet: m["comet_id"]}, nil
}
