package route

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scripts lists every Lua script of the package. Scripts sent with Run load
// themselves (EVALSHA, then EVAL); those sent inside a pipeline cannot, so
// execPipe loads the whole list when a server answers NOSCRIPT.
var scripts []*redis.Script

// script returns lua/<name>.lua as a Script and adds it to scripts. Each is
// declared next to the Go function that runs it.
func script(name string) *redis.Script {
	b, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	s := redis.NewScript(string(b))
	scripts = append(scripts, s)
	return s
}

// Store is the Redis side of the service: connection registry, comet leases,
// delivery guards and the per-user rate limiter. It is safe for concurrent
// use and holds no state of its own besides the client.
type Store struct {
	rdb redis.UniversalClient
}

// New returns a Store over rdb, a *redis.Client or *redis.ClusterClient.
func New(rdb redis.UniversalClient) *Store {
	return &Store{rdb: rdb}
}

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrap("ping", s.rdb.Ping(ctx).Err())
}

// runReplicated runs sc and then WAIT n timeout on one connection to the
// master of keys[0] (one round trip): it returns the script's reply and
// how many replicas acknowledged its writes. WAIT counts the writes of
// its own connection, so it cannot go through the pool apart from the
// script.
func (s *Store) runReplicated(ctx context.Context, sc *redis.Script, keys []string, args []any, n int, timeout time.Duration) (res []any, acks int64, err error) {
	var node *redis.Client
	switch c := s.rdb.(type) {
	case *redis.Client:
		node = c
	case *redis.ClusterClient:
		if node, err = c.MasterForKey(ctx, keys[0]); err != nil {
			return nil, 0, err
		}
		defer func() {
			if err != nil {
				// The master may have moved or died: the next call reads
				// the slots again instead of going back to it.
				c.ReloadState(ctx)
			}
		}()
	default:
		return nil, 0, fmt.Errorf("unsupported client %T", s.rdb)
	}
	for loaded := false; ; loaded = true {
		var ev, wait *redis.Cmd
		_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			ev = sc.EvalSha(ctx, p, keys, args...)
			wait = p.Do(ctx, "wait", n, timeout.Milliseconds())
			return nil
		})
		if !loaded && redis.HasErrorPrefix(ev.Err(), "NOSCRIPT") {
			if err = sc.Load(ctx, node).Err(); err != nil {
				return nil, 0, err
			}
			continue
		}
		if res, err = ev.Slice(); err != nil {
			return nil, 0, err
		}
		if acks, err = wait.Int64(); err != nil {
			return nil, 0, err
		}
		return res, acks, nil
	}
}

// wrap turns a Redis failure into an EUNAVAILABLE error; redis.Nil and nil
// pass through.
func wrap(op string, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return err
	}
	var de *danmaku.Error
	if errors.As(err, &de) {
		return err
	}
	return danmaku.Unavailable("redis "+op, err)
}

// execPipe runs fill in a pipeline. Pipelined scripts are sent as EVALSHA;
// when a server does not know one (fresh or restarted server, new cluster
// node) the scripts are loaded and the pipeline is sent once more. Every
// pipeline given to execPipe must therefore be safe to repeat. With uses
// given, only those scripts are loaded: a hot path that sends one script
// does not pay for loading every script of the package first.
func (s *Store) execPipe(ctx context.Context, op string, fill func(p redis.Pipeliner), uses ...*redis.Script) ([]redis.Cmder, error) {
	for attempt := 0; ; attempt++ {
		p := s.rdb.Pipeline()
		fill(p)
		cmds, err := p.Exec(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			if attempt == 0 && isNoScript(cmds) {
				if lerr := s.loadScripts(ctx, uses...); lerr != nil {
					return cmds, wrap(op, lerr)
				}
				continue
			}
			return cmds, wrap(op, err)
		}
		return cmds, nil
	}
}

func isNoScript(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// loadScripts loads list, or every script when list is empty, on every
// master (ClusterClient.ScriptLoad goes to all shards).
func (s *Store) loadScripts(ctx context.Context, list ...*redis.Script) error {
	if len(list) == 0 {
		list = scripts
	}
	for _, sc := range list {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}
