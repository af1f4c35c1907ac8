package route

import (
	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/config"
)

// Dial returns a client for c: a single-node client for one address, a
// cluster client for several. Context deadlines reach the socket, so a
// caller's timeout bounds a call to a stalled Redis.
func Dial(c config.Redis) redis.UniversalClient {
	return redis.NewUniversalClient(&redis.UniversalOptions{
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
	})
}
