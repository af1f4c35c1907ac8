package route

import (
	"context"
	"embed"
	"errors"
	"strings"

	"github.com/danmaku/danmaku"
	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

func mustScript(name string) *redis.Script {
	b, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(b))
}

var (
	registerScript      = mustScript("register")
	unregisterScript    = mustScript("unregister")
	claimScript         = mustScript("claim")
	releaseClaimsScript = mustScript("release_claims")
	cooldownScript      = mustScript("cooldown")
	lockRenewScript     = mustScript("lock_renew")
	lockReleaseScript   = mustScript("lock_release")
	rateLimitScript     = mustScript("ratelimit")

	allScripts = []*redis.Script{registerScript, unregisterScript, claimScript,
		releaseClaimsScript, cooldownScript, lockRenewScript, lockReleaseScript, rateLimitScript}
)

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

// Client returns the underlying client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrap("ping", s.rdb.Ping(ctx).Err())
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
// pipeline given to execPipe must therefore be safe to repeat.
func (s *Store) execPipe(ctx context.Context, op string, fill func(p redis.Pipeliner)) ([]redis.Cmder, error) {
	for attempt := 0; ; attempt++ {
		p := s.rdb.Pipeline()
		fill(p)
		cmds, err := p.Exec(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			if attempt == 0 && isNoScript(cmds) {
				if lerr := s.loadScripts(ctx); lerr != nil {
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

// loadScripts loads every script on every master (ClusterClient.ScriptLoad
// goes to all shards).
func (s *Store) loadScripts(ctx context.Context) error {
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}
