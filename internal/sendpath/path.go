// Package sendpath is the send path of the service: the checks a comment
// goes through before it is accepted (the sender's identity, validation,
// blocked words, the room's modes, the high-priority budget, bans, mutes
// and rate limits per user and client address) and its produce to Kafka.
// Every door through which viewers send comments (logic's POST /logic/send,
// the admin send) runs the same Path, so a check added here holds for all
// of them.
//
// The checks of concurrent sends share Redis round trips (route.Admitter
// batches bans, mutes and rate limits) and their messages share produce
// requests (kafkax.Producer batches them); a room's settings are read at
// most once per stateFresh by each Path.
package sendpath

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/wordfilter"
	"github.com/danmaku/danmaku/route"
)

// Metrics counts what a Path refuses and how its produces went; the door's
// role names the series.
type Metrics interface {
	// Refused counts a refused send by reason: user, ip, banned, muted,
	// blocked, forbidden, priority, high_rate, members_only, slow_mode,
	// duplicate.
	Refused(reason string)
	// Produced observes one produce: its time and whether it failed.
	Produced(d time.Duration, err error)
}

// Deps are what a Path uses and does not own: the caller closes the
// producer after the Path.
type Deps struct {
	Store    Store
	Producer *kafkax.Producer
	// IDs assigns the ids of messages sent without a msgId.
	IDs *IDGen
	// Words is the blocked-word list.
	Words *wordfilter.Filter
	// Metrics defaults to counting nothing.
	Metrics Metrics
	Log     *zap.Logger
}

// Path checks and produces sends. Its methods are safe for concurrent use.
type Path struct {
	cfg      Config
	store    Store
	producer *kafkax.Producer
	admitter *route.Admitter
	ids      *IDGen
	// rules are the rules in use: cfg's, or those of logic the Path
	// follows (rules.go); shared by the copies of WithMetrics.
	rules *atomic.Pointer[ruleSet]
	// own is the Path's own word list (cfg's); applyMu serializes
	// LoadRules.
	own     *wordfilter.Filter
	applyMu *sync.Mutex
	states  *roomStates
	edited  *edited
	m       Metrics
	log     *zap.Logger
}

// New returns a Path; it starts the admitter's batching, which Close ends.
func New(cfg Config, d Deps) *Path {
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	if d.Metrics == nil {
		d.Metrics = noMetrics{}
	}
	return &Path{
		cfg:      cfg,
		store:    d.Store,
		producer: d.Producer,
		admitter: d.Store.NewAdmitter(route.AdmitOptions{
			Wait: cfg.AdmitBatchWait, Max: cfg.AdmitBatchMax, Timeout: cfg.RedisTimeout,
		}),
		ids:     d.IDs,
		rules:   newRules(cfg, d.Words),
		own:     d.Words,
		applyMu: new(sync.Mutex),
		states:  newRoomStates(),
		edited:  newEdited(),
		m:       d.Metrics,
		log:     log,
	}
}

// Close stops the admitter; checks after it fail.
func (p *Path) Close() { p.admitter.Close() }

// WithMetrics returns a Path that counts in m and shares everything else
// with p (its batching, its producer, its view of the rooms): another door
// of the same process counts its sends under its own role. Close p, not
// the copy.
func (p *Path) WithMetrics(m Metrics) *Path {
	q := *p
	q.m = m
	return &q
}

type noMetrics struct{}

func (noMetrics) Refused(string)                {}
func (noMetrics) Produced(time.Duration, error) {}

// Checked is a send that passed Check: the id of every message ("" where
// the server assigns one at produce), and whether its sender is hidden in
// the room (its messages go to the sender's own connections only, as
// shadow events).
type Checked struct {
	IDs    []string
	Shadow bool
	// HoldMs is the room's non-moderator delay the messages are held for
	// in job (danmaku.Envelope.HoldMs); 0 for moderators of the room and
	// high-priority sends.
	HoldMs int64
	// Review is, per message, the blocked word it matched in a room with
	// review on (it goes to the room's review queue, not to Kafka); ""
	// for the others, nil when none matched.
	Review []string
	// Mod: the sender moderates the room (danmaku.Message.Mod).
	Mod bool
}

// Held returns the ids of the messages held for review.
func (c Checked) Held() []string {
	var out []string
	for i, w := range c.Review {
		if w != "" {
			out = append(out, c.IDs[i])
		}
	}
	return out
}

// Check runs every check of a decoded send, in order: the token's
// claims (auth on) and its right to the priority asked for, validation
// (ids assigned to messages without one), blocked words, the room's
// members-only mode, the high-priority budget, bans, mutes and rate
// limits, then the room's slow mode and unique chat; a room with a delay
// holds the messages of others than its moderators (Checked.HoldMs,
// high-priority ones excepted). It is the one send
// check of the service: every door for comments calls it. claims is nil
// with auth off; ip is the client address the per-address bucket counts.
// A refusal is an error with, for a 429, the wait in whole seconds for
// Retry-After.
//
// Moderators of the room (the moderator role of a token allowing the
// room) are exempt from the room's modes, not from the rest. A send of a
// user hidden in the room (shadow hide) passes like any other: only its
// delivery differs (Checked.Shadow), so the sender cannot tell.
func (p *Path) Check(ctx context.Context, claims *auth.Claims, ip string, req *danmaku.SendRequest) (c Checked, retryAfter int64, err error) {
	if claims != nil {
		if err := p.applyClaims(req, claims); err != nil {
			return c, 0, err
		}
	}
	if err := p.allowPriority(req, claims); err != nil {
		return c, 0, err
	}
	if c.IDs, err = p.conf().Limits().Validate(req); err != nil {
		return c, 0, err
	}
	room, err := p.RoomState(ctx, req.RoomID)
	if err != nil {
		return c, 0, err
	}
	st := room.State
	mod := IsModerator(claims, req.RoomID)
	c.Mod = mod
	if st.Review && !mod {
		c.Review = p.reviewWords(req)
	}
	if c.Review, err = p.checkEdited(ctx, req, room, mod, c.Review); err != nil {
		return c, 0, err
	}
	if err := p.filterWords(req, c.Review); err != nil {
		return c, 0, err
	}
	if st.MembersOnly && !mod && (claims == nil || !claims.HasRole(auth.RoleMember)) {
		p.m.Refused("members_only")
		return c, 0, danmaku.Errorf(danmaku.CodeMembers, "roomId", "the room is members-only: send with a token that has the %s role", auth.RoleMember)
	}
	if retryAfter, err = p.takeHigh(ctx, req); err != nil {
		return c, retryAfter, err
	}
	if retryAfter, err = p.admit(ctx, ip, req); err == nil && !mod && (st.SlowSeconds > 0 || st.UniqueSeconds > 0) {
		retryAfter, err = p.pace(ctx, st, req)
	}
	if err != nil {
		p.giveBackHigh(ctx, req)
		return c, retryAfter, err
	}
	c.Shadow = room.HiddenUntil(strconv.FormatInt(req.UserID, 10), time.Now()) > 0
	if st.DelaySeconds > 0 && !mod && !req.Priority.High() {
		c.HoldMs = int64(st.DelaySeconds) * 1000
	}
	return c, 0, nil
}

// CheckAdmin runs the checks of a send from the backend (the admin send):
// validation, blocked words and the room's high-priority bucket; not the
// sender's own (rate limits, mutes, bans) nor the room's modes.
func (p *Path) CheckAdmin(ctx context.Context, req *danmaku.SendRequest) (c Checked, retryAfter int64, err error) {
	if c.IDs, err = p.conf().Limits().Validate(req); err != nil {
		return c, 0, err
	}
	if err := p.filterWords(req, nil); err != nil {
		return c, 0, err
	}
	retryAfter, err = p.takeHigh(ctx, req)
	return c, retryAfter, err
}

// IsModerator reports whether claims moderate room: the moderator role,
// and room within the token's rooms.
func IsModerator(c *auth.Claims, room string) bool {
	return c != nil && c.HasRole(auth.RoleModerator) && c.AllowsRoom(room)
}

// Produce assigns ids (into c.IDs) and the server time and writes the
// request's messages in one write, so they travel together in one record
// batch: as message envelopes, or as shadow events when the sender is
// hidden in the room. It returns once Kafka acknowledged every one, or
// with an EUNAVAILABLE error within Config.ProduceTimeout.
func (p *Path) Produce(ctx context.Context, req *danmaku.SendRequest, c Checked) error {
	ts := time.Now()
	tsMs := ts.UnixMilli()
	ids := c.IDs
	values := make([][]byte, 0, len(req.Messages))
	var review []danmaku.ReviewItem
	for i, m := range req.Messages {
		if ids[i] == "" {
			ids[i] = p.ids.Next()
		}
		msg := danmaku.Message{ID: ids[i], UID: req.UserID, Name: req.UserName, Content: m.Content, TS: tsMs, Priority: req.Priority, Mod: c.Mod}
		if i < len(c.Review) && c.Review[i] != "" && !c.Shadow {
			review = append(review, danmaku.ReviewItem{ID: msg.ID, UID: msg.UID, Name: msg.Name, Content: msg.Content, TS: tsMs, Word: c.Review[i]})
			continue
		}
		var value []byte
		var err error
		switch {
		case c.Shadow:
			value, err = danmaku.MarshalEvent(danmaku.Event{Op: danmaku.OpShadow, Room: req.RoomID, ID: msg.ID,
				User: strconv.FormatInt(msg.UID, 10), Msg: &msg})
		case c.HoldMs > 0:
			value, err = danmaku.MarshalHeld(req.RoomID, msg, c.HoldMs)
		default:
			value, err = danmaku.MarshalEnvelope(req.RoomID, msg)
		}
		if err != nil {
			return fmt.Errorf("encode envelope: %w", err)
		}
		values = append(values, value)
	}
	if err := p.queueReview(ctx, req, review, ids); err != nil {
		return err
	}
	if len(values) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	err := p.producer.Write(ctx, []byte(req.RoomID), ts, values...)
	p.m.Produced(time.Since(start), err)
	if err != nil {
		// Sampled by the logger: an outage logs a few lines a second, not
		// one per request.
		p.log.Warn("kafka produce failed", zap.String("room", req.RoomID), zap.Int("messages", len(values)), zap.Error(err))
		return danmaku.Unavailable("kafka unavailable, message not accepted; retry with the same msgId", err)
	}
	return nil
}

// queueReview puts the comments of req held for review in its room's
// queue; a retry of one still queued (sent again without its msgId) takes
// the id it has there in ids. A full queue refuses them as a room without
// review would (400 content_blocked naming the first), and nothing of req
// is produced.
func (p *Path) queueReview(ctx context.Context, req *danmaku.SendRequest, items []danmaku.ReviewItem, ids []string) error {
	if len(items) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	defer cancel()
	queued, ok, err := p.store.AddReview(ctx, req.RoomID, items, p.conf().ReviewTTL, p.conf().ReviewMax)
	if err != nil {
		return p.redisError("add review", err)
	}
	for j, id := range queued {
		if i := slices.Index(ids, items[j].ID); i >= 0 && id != "" {
			ids[i] = id
		}
	}
	if !ok {
		p.m.Refused("blocked")
		return danmaku.Errorf(danmaku.CodeBlocked, "messages", "contains a blocked word (the room's review queue is full)")
	}
	return nil
}

// RedisError turns a failed Redis call of op into EUNAVAILABLE (logged)
// when Redis did not answer in time or at all; other errors pass.
func RedisError(log *zap.Logger, op string, err error) error {
	if code := danmaku.ErrorCode(err); code == danmaku.EUNAVAILABLE || errors.Is(err, context.DeadlineExceeded) {
		log.Warn("redis call failed", zap.String("op", op), zap.Error(err))
		return danmaku.Unavailable("redis unavailable", err)
	}
	return err
}

func (p *Path) redisError(op string, err error) error { return RedisError(p.log, op, err) }
