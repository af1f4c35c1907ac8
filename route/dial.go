package route

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/config"
)

// dialerRetries is one dial per attempt of a call. The client's default
// redials 5 times 100 ms apart within each of a call's 4 attempts, so
// every call to a Redis that refuses connections (down, restarting) took
// about 1.7 s to fail: a send's 503, a /readyz answer and every start-up
// check waited that long. With one dial a refused connection fails the
// attempt at once and the call's own retries (with backoff) still ride
// out a blip; on a cluster the call ends, the slot map is reloaded and the
// next call finds the master that took over.
const dialerRetries = 1

// clusterReload bounds how long a cluster client keeps a slot map no error
// contradicted (a failover it only learns about by asking).
const clusterReload = 5 * time.Second

// Dial returns a client for c: a single-node client for one address, a
// cluster client for several. Context deadlines reach the socket, so a
// caller's timeout bounds a call to a stalled Redis.
//
// A cluster client reloads its slot map (CLUSTER SLOTS from any node that
// answers) after every call that failed without a Redis reply (a refused
// connection, a timeout) or with CLUSTERDOWN, at most every 200 ms, and
// every 5 s in any case. A master that died sends no MOVED: without this,
// its slots would stay routed to the dead address until the periodic
// reload (a minute by default), long after a replica took over.
func Dial(c config.Redis) redis.UniversalClient {
	o := &redis.UniversalOptions{
		Addrs:                 c.Addrs,
		Password:              c.Password,
		DB:                    c.DB,
		DialTimeout:           c.DialTimeout,
		ReadTimeout:           c.ReadTimeout,
		WriteTimeout:          c.WriteTimeout,
		PoolSize:              c.PoolSize,
		ReadBufferSize:        c.BufferSize,
		WriteBufferSize:       c.BufferSize,
		ContextTimeoutEnabled: true,
		DialerRetries:         dialerRetries,
	}
	if len(c.Addrs) < 2 {
		return redis.NewClient(o.Simple())
	}
	co := o.Cluster()
	co.ClusterStateReloadInterval = clusterReload
	rc := redis.NewClusterClient(co)
	rc.AddHook(reloadOnFailure{rc})
	return rc
}

// reloadOnFailure is the cluster client's hook that reloads the slot map
// when a call failed in a way a failover explains.
type reloadOnFailure struct{ rc *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(err)
		return err
	}
}

func (h reloadOnFailure) check(err error) {
	if err != nil && topologySuspect(err) {
		h.rc.ReloadState(context.Background()) // asynchronous, coalesced
	}
}

// topologySuspect reports whether err may mean the cluster changed: no
// Redis reply at all, a node saying the cluster is down, or a redirection
// (which the cluster client follows itself; a call on one node's client
// sees it when the slot moved).
func topologySuspect(err error) bool {
	if errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
	}
	return true
}
