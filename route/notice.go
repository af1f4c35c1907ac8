package route

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

var (
	claimNoticesScript = script("claim_notices")
	markNoticesScript  = script("mark_notices")
)

// NoticeClaim names one notice of a delivery: its user ("" for a
// broadcast) and its id.
type NoticeClaim struct {
	User string
	ID   string
}

// NoticeOptions are the owner and claim duration of BeginNotices.
type NoticeOptions struct {
	Owner    string
	ClaimTTL time.Duration
}

// NoticeBegin is the outcome of BeginNotices.
type NoticeBegin struct {
	// States holds one claim state per notice, in the claims' order.
	States []ClaimState
	// Comets maps each user who has a claimed notice and at least one
	// connection to the comets holding them (cometID -> connections), as
	// user:online:{user} lists them.
	Comets map[string]map[string]int64
}

// noticeGroup is the claims of one user (or of the broadcasts) in a call:
// one script, one hash tag.
type noticeGroup struct {
	user string
	idx  []int // indexes into the claims
	keys []string
	cmd  *redis.Cmd
}

// groupNotices checks claims and groups them by user, in order of first
// appearance. Ids must be distinct within a user.
func groupNotices(claims []NoticeClaim) ([]*noticeGroup, error) {
	byUser := map[string]*noticeGroup{}
	var groups []*noticeGroup
	seen := make(map[NoticeClaim]struct{}, len(claims))
	for i, c := range claims {
		if c.User != "" {
			if err := danmaku.CheckID("user", c.User); err != nil {
				return nil, err
			}
		}
		if err := danmaku.CheckID("msgId", c.ID); err != nil {
			return nil, err
		}
		if _, dup := seen[c]; dup {
			return nil, danmaku.Errorf(danmaku.EINVALID, "msgId", "notice id %s repeated in one call", c.ID)
		}
		seen[c] = struct{}{}
		g := byUser[c.User]
		if g == nil {
			g = &noticeGroup{user: c.User}
			byUser[c.User] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
		g.keys = append(g.keys, noticeProcessedKey(c.User, c.ID))
	}
	return groups, nil
}

// BeginNotices claims notices for an owner, like BeginBroadcast claims a
// room's messages (short claim, "done" after EndNotices, a claim of the
// same owner refreshed), and reads the connections of every user who has
// a claimed notice. One script per user, with the user's claims and
// user:online:{user} under one hash tag (so it runs on a cluster), all in
// one pipelined round trip whatever the number of users. Broadcast
// notices (User "") are claimed the same way, under a tag of their own,
// and need no route: they go to every live comet. Notices take no lock,
// open no window and get no position.
func (s *Store) BeginNotices(ctx context.Context, claims []NoticeClaim, o NoticeOptions) (NoticeBegin, error) {
	b := NoticeBegin{States: make([]ClaimState, len(claims)), Comets: map[string]map[string]int64{}}
	if err := danmaku.CheckID("owner", o.Owner); err != nil {
		return b, err
	}
	groups, err := groupNotices(claims)
	if err != nil || len(groups) == 0 {
		return b, err
	}
	_, err = s.execPipe(ctx, "begin notices", func(p redis.Pipeliner) {
		for _, g := range groups {
			keys := g.keys
			if g.user != "" {
				keys = append(keys[:len(keys):len(keys)], userOnlineKey(g.user))
			}
			g.cmd = claimNoticesScript.EvalSha(ctx, p, keys, o.Owner, o.ClaimTTL.Milliseconds(), len(g.keys))
		}
	}, claimNoticesScript)
	if err != nil {
		return b, err
	}
	for _, g := range groups {
		res, err := g.cmd.Slice()
		if err != nil || len(res) != 2 {
			return b, danmaku.Errorf(danmaku.EINTERNAL, "", "begin notices returned %v (%v)", res, err)
		}
		states, _ := res[0].([]any)
		for k, i := range g.idx {
			if k < len(states) {
				n, _ := states[k].(int64)
				b.States[i] = ClaimState(n)
			}
		}
		if comets := connComets(res[1]); len(comets) > 0 {
			b.Comets[g.user] = comets
		}
	}
	return b, nil
}

// connComets turns an HGETALL of user:online:{user} (connId -> cometId)
// into cometID -> connections.
func connComets(reply any) map[string]int64 {
	flat, _ := reply.([]any)
	out := make(map[string]int64, len(flat)/2)
	for i := 1; i < len(flat); i += 2 {
		if id, _ := flat[i].(string); id != "" {
			out[id]++
		}
	}
	return out
}

// EndNotices marks delivered notices "done" for ttl: one script per user,
// in one pipelined round trip. A redelivery then finds them Processed.
func (s *Store) EndNotices(ctx context.Context, claims []NoticeClaim, ttl time.Duration) error {
	groups, err := groupNotices(claims)
	if err != nil || len(groups) == 0 {
		return err
	}
	_, err = s.execPipe(ctx, "end notices", func(p redis.Pipeliner) {
		for _, g := range groups {
			markNoticesScript.EvalSha(ctx, p, g.keys, ttl.Milliseconds())
		}
	}, markNoticesScript)
	return err
}

// UserComets returns the comets holding connections of user (cometID ->
// connections), from user:online:{user}; empty when the user has none.
func (s *Store) UserComets(ctx context.Context, user string) (map[string]int64, error) {
	if err := danmaku.CheckID("user", user); err != nil {
		return nil, err
	}
	m, err := s.rdb.HGetAll(ctx, userOnlineKey(user)).Result()
	if err != nil {
		return nil, wrap("user comets", err)
	}
	out := make(map[string]int64, len(m))
	for _, comet := range m {
		out[comet]++
	}
	return out, nil
}
