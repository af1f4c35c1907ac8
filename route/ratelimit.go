package route

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

var rateLimitScript = script("ratelimit")

func checkBucket(n int, rate float64, burst int) error {
	if rate <= 0 || burst <= 0 {
		return danmaku.Errorf(danmaku.EINVALID, "rate", "rate and burst must be positive")
	}
	if n <= 0 || n > burst {
		return danmaku.Errorf(danmaku.EINVALID, "n", "must be between 1 and the burst (%d), got %d", burst, n)
	}
	return nil
}

// Bucket is a token bucket's refill rate (tokens per second) and size.
type Bucket struct {
	Rate  float64
	Burst int
}

// Admission is one send's checks: may User post N messages to Room from
// the client address IP?
type Admission struct {
	User string
	Room string
	N    int
	// UserBucket is the per-user limit.
	UserBucket Bucket
	// IP is the client address; "" (or a zero IPBucket.Rate) skips the
	// per-address bucket. IPv6 addresses share one bucket per /64, the
	// block one subscriber usually holds.
	IP       string
	IPBucket Bucket
}

// Verdict is the answer of Admit.
type Verdict struct {
	// Allowed: the tokens were taken from every bucket.
	Allowed bool
	// Banned: the user is banned from the room; RetryAfter is what the ban
	// still lasts.
	Banned bool
	// Muted: the user is muted in the room or everywhere; RetryAfter is
	// what the mute still lasts. Everywhere: the mute is the one of every
	// room (reported before a room's mute when both hold).
	Muted, Everywhere bool
	// Limit names the bucket that refused: "user" or "ip" (Admit), "high"
	// (TakeHigh); RetryAfter is when it will hold N tokens.
	Limit      string
	RetryAfter time.Duration
}

// Admit checks the user's ban from the room and mute flags and takes N
// tokens from the user's and the address's buckets, all in one round trip,
// or takes nothing. On a single server it is one script over every key
// (admit.lua, the script of an Admitter's batches, here with a batch of
// one); on a cluster see admitPipelined.
func (s *Store) Admit(ctx context.Context, a Admission) (Verdict, error) {
	r, err := prepareAdmission(a)
	if err != nil {
		return Verdict{}, err
	}
	if s.cluster() {
		return s.admitPipelined(ctx, &r)
	}
	vs, err := s.admitBatch(ctx, []*admitReq{&r})
	if err != nil {
		return Verdict{}, err
	}
	return vs[0], nil
}

// admitPipelined is Admit on a cluster. The user's script (mute flags and
// bucket share the user's hash tag), the address's script (its own hash
// tag) and the ban's PTTL (the room's hash tag) are pipelined: the keys live
// on different shards, and putting every bucket under one hash tag would
// send all senders' traffic to a single shard. Each script is atomic on its
// own; when one check refuses and a script took its tokens, the tokens are
// given back (a second round trip, only on that refusal path), so a request
// refused by one check never spends another's budget.
func (s *Store) admitPipelined(ctx context.Context, r *admitReq) (Verdict, error) {
	a := &r.a
	userKeys := []string{r.userKey, r.muteAll, r.muteRoom}
	var userCmd, ipCmd *redis.Cmd
	var banCmd *redis.DurationCmd
	_, err := s.execPipe(ctx, "admit", func(p redis.Pipeliner) {
		banCmd = p.PTTL(ctx, r.ban)
		userCmd = rateLimitScript.EvalSha(ctx, p, userKeys, a.UserBucket.Rate, a.UserBucket.Burst, a.N)
		if r.ipKey != "" {
			ipCmd = rateLimitScript.EvalSha(ctx, p, []string{r.ipKey}, a.IPBucket.Rate, a.IPBucket.Burst, a.N)
		}
	}, rateLimitScript)
	if err != nil {
		return Verdict{}, err
	}
	ban, err := banCmd.Result()
	if err != nil {
		return Verdict{}, wrap("admit", err)
	}
	user, err := bucketResult(userCmd)
	if err != nil {
		return Verdict{}, err
	}
	ip := [2]int64{1, 0}
	if ipCmd != nil {
		if ip, err = bucketResult(ipCmd); err != nil {
			return Verdict{}, err
		}
	}
	var v Verdict
	switch {
	case ban != -2: // PTTL: -2 no key, -1 no TTL (a ban too)
		v = Verdict{Banned: true, RetryAfter: max(ban, 0)}
	case user[0] == -1 || user[0] == -3:
		v = Verdict{Muted: true, Everywhere: user[0] == -3, RetryAfter: time.Duration(max(user[1], 0)) * time.Millisecond}
	case user[0] == 0:
		v = Verdict{Limit: "user", RetryAfter: time.Duration(user[1]) * time.Millisecond}
	case ip[0] == 0:
		v = Verdict{Limit: "ip", RetryAfter: time.Duration(ip[1]) * time.Millisecond}
	default:
		return Verdict{Allowed: true}, nil
	}
	// Give back what the scripts took. Best effort: a failure costs the
	// sender at most one request's tokens.
	if user[0] == 1 {
		rateLimitScript.Run(ctx, s.rdb, userKeys[:1], a.UserBucket.Rate, a.UserBucket.Burst, -a.N)
	}
	if ipCmd != nil && ip[0] == 1 {
		rateLimitScript.Run(ctx, s.rdb, []string{r.ipKey}, a.IPBucket.Rate, a.IPBucket.Burst, -a.N)
	}
	return v, nil
}

func bucketResult(c *redis.Cmd) ([2]int64, error) {
	res, err := c.Int64Slice()
	if err != nil {
		return [2]int64{}, wrap("admit", err)
	}
	if len(res) != 2 {
		return [2]int64{}, danmaku.Errorf(danmaku.EINTERNAL, "", "rate limit script returned %v", res)
	}
	return [2]int64{res[0], res[1]}, nil
}

// TakeHigh takes n tokens from room's high-priority bucket (one round
// trip, on the Redis clock, shared by every logic instance). A refusal is
// a Verdict with Limit "high" and RetryAfter the time until the bucket
// holds n tokens.
func (s *Store) TakeHigh(ctx context.Context, room string, n int, b Bucket) (Verdict, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return Verdict{}, err
	}
	if err := checkBucket(n, b.Rate, b.Burst); err != nil {
		return Verdict{}, err
	}
	res, err := bucketResult(rateLimitScript.Run(ctx, s.rdb, []string{highRateKey(room)}, b.Rate, b.Burst, n))
	if err != nil {
		return Verdict{}, err
	}
	if res[0] == 1 {
		return Verdict{Allowed: true}, nil
	}
	return Verdict{Limit: "high", RetryAfter: time.Duration(res[1]) * time.Millisecond}, nil
}

// GiveBackHigh returns n tokens TakeHigh took, for a request refused by a
// later check; the bucket holds at most its burst.
func (s *Store) GiveBackHigh(ctx context.Context, room string, n int, b Bucket) error {
	if err := danmaku.CheckID("room", room); err != nil {
		return err
	}
	if err := checkBucket(n, b.Rate, b.Burst); err != nil {
		return err
	}
	_, err := bucketResult(rateLimitScript.Run(ctx, s.rdb, []string{highRateKey(room)}, b.Rate, b.Burst, -n))
	return err
}

// Mute mutes user in room for d ("" room: everywhere). Muting again
// replaces the duration.
func (s *Store) Mute(ctx context.Context, user, room string, d time.Duration) error {
	if err := checkMute(user, room); err != nil {
		return err
	}
	if d < time.Millisecond {
		return danmaku.Errorf(danmaku.EINVALID, "duration", "must be at least 1ms")
	}
	return s.setUntil(ctx, muteKey(user, room), Sanction{Kind: "mute", User: user, Room: room}, d)
}

// Unmute lifts a mute of user in room ("" room: the mute everywhere; a
// room mute stays). It reports whether there was one.
func (s *Store) Unmute(ctx context.Context, user, room string) (bool, error) {
	if err := checkMute(user, room); err != nil {
		return false, err
	}
	n, err := s.rdb.Del(ctx, muteKey(user, room)).Result()
	if err == nil {
		err = s.unindex(ctx, Sanction{Kind: "mute", User: user, Room: room})
	}
	return n > 0, wrap("unmute", err)
}

func checkMute(user, room string) error {
	if err := danmaku.CheckID("user", user); err != nil {
		return err
	}
	if room != "" {
		return danmaku.CheckID("room", room)
	}
	return nil
}
