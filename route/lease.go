package route

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

// CometInfo is what a comet publishes about itself in its lease.
type CometInfo struct {
	ID      string
	Addr    string // internal push address, host:port
	Started time.Time
}

// ReleaseLease deletes the comet's lease at once (graceful shutdown).
func (s *Store) ReleaseLease(ctx context.Context, comet string) error {
	if err := danmaku.CheckID("comet", comet); err != nil {
		return err
	}
	return wrap("release lease", s.rdb.Del(ctx, cometKey(comet)).Err())
}

// LiveComets returns the comets whose lease is current, by id.
func (s *Store) LiveComets(ctx context.Context) (map[string]CometInfo, error) {
	live, _, err := s.comets(ctx)
	return live, err
}

// DeadComets returns the ids of comets listed in the index whose lease has
// expired: their routes are stale and RemoveComet cleans them.
func (s *Store) DeadComets(ctx context.Context) ([]string, error) {
	_, dead, err := s.comets(ctx)
	return dead, err
}

func (s *Store) comets(ctx context.Context) (map[string]CometInfo, []string, error) {
	ids, err := s.rdb.SMembers(ctx, cometsIndexKey).Result()
	if err != nil {
		return nil, nil, wrap("list comets", err)
	}
	live := make(map[string]CometInfo, len(ids))
	if len(ids) == 0 {
		return live, nil, nil
	}
	cmds, err := s.execPipe(ctx, "list comets", func(p redis.Pipeliner) {
		for _, id := range ids {
			p.HGetAll(ctx, cometKey(id))
		}
	})
	if err != nil {
		return nil, nil, err
	}
	var dead []string
	for i, c := range cmds {
		m := c.(*redis.MapStringStringCmd).Val()
		if m["addr"] == "" {
			dead = append(dead, ids[i])
			continue
		}
		ms, _ := strconv.ParseInt(m["started"], 10, 64)
		live[ids[i]] = CometInfo{ID: ids[i], Addr: m["addr"], Started: time.UnixMilli(ms)}
	}
	return live, dead, nil
}
