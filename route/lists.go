package route

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

// Sanction lists. A mute or a ban is a flag key with a TTL (Mute, Ban),
// which only a scan could list; so every Mute and Ban also enters the
// sanction in two sorted sets scored by its end (Unix ms): its room's
// (room:sanctions:{room}, absent for a mute everywhere) and the service's
// (admin:sanctions). Unmute and Unban remove it from both; ended entries
// are removed by the next write or read of the set. Sanctions set before
// the index existed are enforced but not listed.

// Sanction is one active mute or ban: its kind ("mute" or "ban"), its
// user, its room ("" for a mute everywhere) and its end in Unix ms.
type Sanction struct {
	Kind, User, Room string
	Until            int64
}

// MaxListed bounds how many sanctions of one set Sanctions returns, the
// soonest to end first.
const MaxListed = 1000

// roomMember is a sanction's member in its room's set, globalMember in
// the service's; ids hold no ':', so the parts split back.
func (x Sanction) roomMember() string { return x.Kind + ":" + x.User }
func (x Sanction) globalMember() string {
	return x.Kind + ":" + x.User + ":" + x.Room
}

// index enters x in its sets, pruning their ended entries.
func (s *Store) index(ctx context.Context, x Sanction) error {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if x.Room != "" {
			k := roomSanctionsKey(x.Room)
			p.ZRemRangeByScore(ctx, k, "-inf", now)
			p.ZAdd(ctx, k, redis.Z{Score: float64(x.Until), Member: x.roomMember()})
		}
		p.ZRemRangeByScore(ctx, sanctionsKey, "-inf", now)
		p.ZAdd(ctx, sanctionsKey, redis.Z{Score: float64(x.Until), Member: x.globalMember()})
		return nil
	})
	return wrap("index "+x.Kind, err)
}

// unindex removes x (its Until unused) from its sets.
func (s *Store) unindex(ctx context.Context, x Sanction) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if x.Room != "" {
			p.ZRem(ctx, roomSanctionsKey(x.Room), x.roomMember())
		}
		p.ZRem(ctx, sanctionsKey, x.globalMember())
		return nil
	})
	return wrap("unindex "+x.Kind, err)
}

// Sanctions lists the active mutes and bans of room, soonest to end
// first, at most MaxListed; room "" lists those of the whole service
// (mutes everywhere and every room's sanctions).
func (s *Store) Sanctions(ctx context.Context, room string) ([]Sanction, error) {
	key := sanctionsKey
	if room != "" {
		if err := danmaku.CheckID("room", room); err != nil {
			return nil, err
		}
		key = roomSanctionsKey(room)
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	var zs *redis.ZSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, key, "-inf", now)
		zs = p.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: "(" + now, Max: "+inf", Count: MaxListed})
		return nil
	})
	if err != nil {
		return nil, wrap("sanctions", err)
	}
	out := make([]Sanction, 0, len(zs.Val()))
	for _, z := range zs.Val() {
		m, _ := z.Member.(string)
		parts := strings.Split(m, ":")
		x := Sanction{Kind: parts[0], Until: int64(z.Score), Room: room}
		switch {
		case room != "" && len(parts) == 2:
			x.User = parts[1]
		case room == "" && len(parts) == 3:
			x.User, x.Room = parts[1], parts[2]
		default:
			continue
		}
		out = append(out, x)
	}
	return out, nil
}
