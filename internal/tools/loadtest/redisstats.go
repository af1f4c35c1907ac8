package loadtest

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisNodes reads INFO commandstats of the Redis servers given to -redis:
// one standalone server, or the masters of a cluster (each counts the
// commands it ran; a replica would count its master's writes again).
type redisNodes struct {
	addrs   []string
	clients []*redis.Client
}

func newRedisNodes(list string) *redisNodes {
	n := &redisNodes{addrs: splitAddrs(list)}
	for _, a := range n.addrs {
		n.clients = append(n.clients, redis.NewClient(&redis.Options{Addr: a, DialTimeout: 2 * time.Second}))
	}
	return n
}

// splitAddrs reads a comma-separated address list.
func splitAddrs(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func (n *redisNodes) close() {
	for _, c := range n.clients {
		c.Close()
	}
}

// statsIf is stats on a possibly nil n (no -redis): nil, nil.
func (n *redisNodes) statsIf(ctx context.Context) (map[string]map[string]int64, error) {
	if n == nil {
		return nil, nil
	}
	return n.stats(ctx)
}

// stats returns the calls per command of every node, by address.
func (n *redisNodes) stats(ctx context.Context) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for i, c := range n.clients {
		s, err := commandStats(ctx, c)
		if err != nil {
			return nil, err
		}
		out[n.addrs[i]] = s
	}
	return out, nil
}

// commandStats reads INFO commandstats: calls per command.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		// cmdstat_evalsha:calls=12,usec=...
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[name] = n
			}
		}
	}
	return out, nil
}

// redisDelta sums the commands run between two readings of every node
// (INFO itself left out) and divides by the accepted messages. With more
// than one node it also gives each node's share.
func redisDelta(before, after map[string]map[string]int64, accepted int64) *RedisStats {
	rs := &RedisStats{ByCommand: map[string]int64{}}
	for node, cmds := range after {
		var total int64
		for k, v := range cmds {
			if d := v - before[node][k]; d > 0 && k != "info" {
				rs.ByCommand[k] += d
				total += d
			}
		}
		rs.Commands += total
		if len(after) > 1 {
			if rs.ByNode == nil {
				rs.ByNode = map[string]int64{}
			}
			rs.ByNode[node] = total
		}
	}
	if accepted > 0 {
		rs.PerMessage = float64(rs.Commands) / float64(accepted)
	}
	return rs
}
