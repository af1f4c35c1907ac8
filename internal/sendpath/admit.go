package sendpath

import (
	"context"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/unitext"
	"github.com/danmaku/danmaku/route"
)

// retrySeconds is a wait in whole seconds, rounded up and at least one,
// for a Retry-After header.
func retrySeconds(d time.Duration) int64 { return max(int64((d+time.Second-1)/time.Second), 1) }

// admit checks the sender's ban from the room and mutes and takes the
// request's tokens from the user's and the client address ip's buckets, in
// one Redis round trip shared with the concurrent requests of its batch
// (route.Admitter). A refusal is an error (403 banned or muted, 429
// rate_limited) with the wait in whole seconds for the Retry-After header.
func (p *Path) admit(ctx context.Context, ip string, req *danmaku.SendRequest) (retryAfter int64, err error) {
	// The admitter answers within its Timeout, Config.RedisTimeout.
	v, err := p.admitter.Admit(ctx, route.Admission{
		User: strconv.FormatInt(req.UserID, 10), Room: req.RoomID, N: len(req.Messages),
		UserBucket: route.Bucket{Rate: p.conf().RateLimit, Burst: p.conf().RateBurst},
		IP:         ip,
		IPBucket:   route.Bucket{Rate: p.conf().IPRateLimit, Burst: p.conf().IPRateBurst},
	})
	if err != nil {
		return 0, p.redisError("rate limit", err)
	}
	if v.Allowed {
		return 0, nil
	}
	secs := retrySeconds(v.RetryAfter)
	switch {
	case v.Banned:
		p.m.Refused("banned")
		return 0, danmaku.Errorf(danmaku.CodeBanned, "roomId", "banned from this room for another %d s", secs)
	case v.Muted && v.Everywhere:
		p.m.Refused("muted")
		return 0, danmaku.Errorf(danmaku.CodeMuted, "userId", "muted everywhere (in every room) for another %d s", secs)
	case v.Muted:
		p.m.Refused("muted")
		return 0, danmaku.Errorf(danmaku.CodeMuted, "userId", "muted in this room for another %d s", secs)
	case v.Limit == "ip":
		p.m.Refused("ip")
		return secs, danmaku.Errorf(danmaku.ERATELIMIT, "",
			"rate limit of this client address exceeded: %g messages per second, burst %d; retry in %d s", p.conf().IPRateLimit, p.conf().IPRateBurst, secs)
	}
	p.m.Refused("user")
	return secs, danmaku.Errorf(danmaku.ERATELIMIT, "userId",
		"rate limit exceeded: %g messages per second, burst %d; retry in %d s", p.conf().RateLimit, p.conf().RateBurst, secs)
}

// highBucket is the room's high-priority bucket.
func (p *Path) highBucket() route.Bucket {
	return route.Bucket{Rate: p.conf().HighRateLimit, Burst: p.conf().HighRateBurst}
}

// takeHigh takes the tokens of a high-priority request from its room's
// bucket; a refusal is 429 with the wait in whole seconds for Retry-After.
// A normal request takes nothing.
func (p *Path) takeHigh(ctx context.Context, req *danmaku.SendRequest) (retryAfter int64, err error) {
	if !req.Priority.High() {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	defer cancel()
	v, err := p.store.TakeHigh(ctx, req.RoomID, len(req.Messages), p.highBucket())
	if err != nil {
		return 0, p.redisError("high rate limit", err)
	}
	if v.Allowed {
		return 0, nil
	}
	p.m.Refused("high_rate")
	secs := retrySeconds(v.RetryAfter)
	return secs, danmaku.Errorf(danmaku.ERATELIMIT, "priority",
		"the room's high-priority rate limit is exceeded: %g messages per second, burst %d; retry in %d s",
		p.conf().HighRateLimit, p.conf().HighRateBurst, secs)
}

// giveBackHigh returns what takeHigh took for a request refused by a later
// check. Best effort: a failure costs the room at most one request's
// tokens.
func (p *Path) giveBackHigh(ctx context.Context, req *danmaku.SendRequest) {
	if !req.Priority.High() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.RedisTimeout)
	defer cancel()
	if err := p.store.GiveBackHigh(ctx, req.RoomID, len(req.Messages), p.highBucket()); err != nil {
		p.log.Debug("give back high-priority tokens", zap.String("room", req.RoomID), zap.Error(err))
	}
}

// pace checks the room's slow mode and unique chat (route.CheckPace, one
// script on the room's shard) once the send passed its rate limits: slow
// mode refuses a send within SlowSeconds of the user's last one in the
// room (429 slow_mode, Retry-After the rest of the interval) and a request
// of more than one message; unique chat refuses a message whose plain
// form (unitext.Plain) was sent to the room in the last UniqueSeconds (409
// duplicate_content naming it).
func (p *Path) pace(ctx context.Context, st danmaku.RoomState, req *danmaku.SendRequest) (retryAfter int64, err error) {
	if st.SlowSeconds > 0 && len(req.Messages) > 1 {
		p.m.Refused("slow_mode")
		return 0, danmaku.Errorf(danmaku.EINVALID, "messages", "slow mode: one message per request")
	}
	pc := route.Pace{Room: req.RoomID, User: strconv.FormatInt(req.UserID, 10),
		Slow: time.Duration(st.SlowSeconds) * time.Second, Unique: time.Duration(st.UniqueSeconds) * time.Second}
	if st.UniqueSeconds > 0 {
		pc.Plain = make([]string, len(req.Messages))
		for i, m := range req.Messages {
			pc.Plain[i] = unitext.Plain(m.Content)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	defer cancel()
	v, err := p.store.CheckPace(ctx, pc)
	switch {
	case err != nil:
		return 0, p.redisError("pace", err)
	case v.Wait > 0:
		p.m.Refused("slow_mode")
		secs := retrySeconds(v.Wait)
		return secs, danmaku.Errorf(danmaku.CodeSlowMode, "userId", "slow mode: one message every %d s in this room; retry in %d s", st.SlowSeconds, secs)
	case v.Repeat >= 0:
		p.m.Refused("duplicate")
		return 0, danmaku.Errorf(danmaku.CodeDuplicate, "messages["+strconv.Itoa(v.Repeat)+"].content",
			"unique chat: the same comment was sent to this room in the last %d s", st.UniqueSeconds)
	}
	return 0, nil
}
