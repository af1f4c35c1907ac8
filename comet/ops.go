package comet

import (
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
)

// codeRateLimited is the error frame of a room op beyond the connection's
// budget (Config.OpsRate, Config.OpsBurst); it carries retryAfterMs.
const codeRateLimited = danmaku.ERATELIMIT

// clock0 anchors the monotonic times opBucket keeps as integers.
var clock0 = time.Now()

// opBucket is a token bucket for one connection's room ops: up to burst
// ops at once, then rate a second. It is 16 bytes, so an idle viewer pays
// little for it; the zero value is a full bucket.
type opBucket struct {
	used float64 // tokens spent, not yet refilled
	last int64   // when used was last updated, nanoseconds after clock0
}

// take spends a token at now, or reports how long until one is there.
func (b *opBucket) take(rate float64, burst int, now time.Duration) (bool, time.Duration) {
	if rate <= 0 {
		return true, 0
	}
	b.used = max(0, b.used-float64(int64(now)-b.last)*rate/float64(time.Second))
	b.last = int64(now)
	if b.used+1 <= float64(burst) {
		b.used++
		return true, 0
	}
	wait := (b.used + 1 - float64(burst)) / rate
	return false, time.Duration(wait * float64(time.Second))
}

// mayOp spends one of the connection's room ops on an op about room, or
// answers it with the error frame rate_limited (counted) and reports
// false. Only the reader calls it.
func (c *conn) mayOp(room string) bool {
	ok, wait := c.ops.take(c.s.cfg.OpsRate, c.s.cfg.OpsBurst, time.Since(clock0))
	if ok {
		return true
	}
	c.s.metrics.opLimited()
	ms := max(1, wait.Milliseconds())
	f := errorFrame{Op: opError, Room: room, Code: codeRateLimited, RetryAfterMs: ms,
		Message: "too many room ops on this connection: try again in " + strconv.FormatInt(ms, 10) + " ms"}
	c.send(prepare(f), len(f.Room)+len(f.Message)+64)
	return false
}
