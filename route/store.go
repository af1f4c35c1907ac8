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

// runReplicated runs sc and then WAIT n timeout in one pipeline on one
// connection to the master of keys[0] (one round trip): it returns the
// script's reply and how many replicas acknowledged its writes. WAIT
// counts the writes of its own connection, so it cannot go through the
// pool apart from the script.
func (s *Store) runReplicated(ctx context.Context, op string, sc *redis.Script, keys []string, args []any, n int, timeout time.Duration) ([]any, int64, error) {
	var node *redis.Client
	check := func(error) {}
	switch c := s.rdb.(type) {
	case *redis.Client:
		node = c
	case *redis.ClusterClient:
		var err error
		if node, err = c.MasterForKey(ctx, keys[0]); err != nil {
			return nil, 0, wrap(op, err)
		}
		// A node's client runs without the cluster client's hooks: what it
		// meets goes to the same slot-map reload.
		check = reloadOnFailure{c}.check
	default:
		return nil, 0, fmt.Errorf("unsupported client %T", s.rdb)
	}
	var ev, wait *redis.Cmd
	_, err := execPipeOn(ctx, node, op, func(p redis.Pipeliner) {
		ev = sc.EvalSha(ctx, p, keys, args...)
		wait = p.Do(ctx, "wait", n, timeout.Milliseconds())
	}, sc)
	if err != nil {
		check(err)
		return nil, 0, err
	}
	res, err := ev.Slice()
	if err != nil {
		return nil, 0, wrap(op, err)
	}
	acks, err := wait.Int64()
	return res, acks, wrap(op, err)
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
	return execPipeOn(ctx, s.rdb, op, fill, uses...)
}

// piper is what execPipeOn needs of a client: the Store's, or one node's.
type piper interface {
	Pipeline() redis.Pipeliner
	redis.Scripter
}

// execPipeOn is execPipe on c.
func execPipeOn(ctx context.Context, c piper, op string, fill func(p redis.Pipeliner), uses ...*redis.Script) ([]redis.Cmder, error) {
	for attempt := 0; ; attempt++ {
		p := c.Pipeline()
		fill(p)
		cmds, err := p.Exec(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			if attempt == 0 && isNoScript(cmds) {
				if lerr := loadScripts(ctx, c, uses...); lerr != nil {
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

// loadScripts loads list, or every script when list is empty, through c:
// on every master for a cluster client (ClusterClient.ScriptLoad goes to
// all shards).
func loadScripts(ctx context.Context, c redis.Scripter, list ...*redis.Script) error {
	if len(list) == 0 {
		list = scripts
	}
	for _, sc := range list {
		if err := sc.Load(ctx, c).Err(); err != nil {
			return err
		}
	}
	return nil
}
