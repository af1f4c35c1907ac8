package route

import (
	"context"
	"time"

	"github.com/danmaku/danmaku"
)

var rateLimitScript = script("ratelimit")

// Allow takes n tokens from user's bucket, which refills rate tokens per
// second up to burst. It is one atomic script on the Redis clock, so any
// number of logic instances share one budget per user. When not allowed,
// retryAfter says when n tokens will be there.
func (s *Store) Allow(ctx context.Context, user string, n int, rate float64, burst int) (ok bool, retryAfter time.Duration, err error) {
	if err := danmaku.CheckID("user", user); err != nil {
		return false, 0, err
	}
	if rate <= 0 || burst <= 0 {
		return false, 0, danmaku.Errorf(danmaku.EINVALID, "rate", "rate and burst must be positive")
	}
	if n <= 0 || n > burst {
		return false, 0, danmaku.Errorf(danmaku.EINVALID, "n", "must be between 1 and the burst (%d), got %d", burst, n)
	}
	res, err := rateLimitScript.Run(ctx, s.rdb, []string{rateKey(user)}, rate, burst, n).Int64Slice()
	if err != nil {
		return false, 0, wrap("rate limit", err)
	}
	if len(res) != 2 {
		return false, 0, danmaku.Errorf(danmaku.EINTERNAL, "", "rate limit script returned %v", res)
	}
	return res[0] == 1, time.Duration(res[1]) * time.Millisecond, nil
}
