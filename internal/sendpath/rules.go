package sendpath

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/danmaku/danmaku/internal/wordfilter"
)

// Rules are the settings of the send path that every door must apply
// alike: the bounds of a send, the rate limits per user, address and
// room, the blocked words and the review queue's bounds. logic's are the
// service's: logic writes them to Redis (PublishRules) at start, on every
// reload of its word list and every Config.RulesRefresh, and a comet that
// takes sends over its viewers' sockets reads them (LoadRules) at start,
// on SIGHUP and every RulesRefresh, in place of its own send section's.
// A comment is then checked alike whichever way it comes, and the rules
// are set in one place: logic's configuration.
//
// What stays each door's own: node_id, the batching of the Redis checks
// and of the produce, and the timeouts.
type Rules struct {
	MaxMessages     int     `json:"maxMessages"`
	MaxContentRunes int     `json:"maxContentRunes"`
	MaxNameRunes    int     `json:"maxNameRunes"`
	RateLimit       float64 `json:"rateLimit"`
	RateBurst       int     `json:"rateBurst"`
	IPRateLimit     float64 `json:"ipRateLimit"`
	IPRateBurst     int     `json:"ipRateBurst"`
	HighRateLimit   float64 `json:"highRateLimit"`
	HighRateBurst   int     `json:"highRateBurst"`
	ReviewTTLMs     int64   `json:"reviewTtlMs"`
	ReviewMax       int     `json:"reviewMax"`
	// WordsMode is the blocked words' mode (off, reject, mask) and Words
	// the whole list in use (the file's and the configured ones).
	WordsMode string   `json:"wordsMode"`
	Words     []string `json:"words"`
}

// ruleSet is the configuration a Path applies: its own Config with the
// rules in use, and the word list of those rules.
type ruleSet struct {
	cfg   Config
	words *wordfilter.Filter
	// applied is the encoded Rules the set was made of (nil: the Path's
	// own configuration).
	applied []byte
}

func newRules(cfg Config, words *wordfilter.Filter) *atomic.Pointer[ruleSet] {
	p := new(atomic.Pointer[ruleSet])
	p.Store(&ruleSet{cfg: cfg, words: words})
	return p
}

// conf is the configuration in use; filter its blocked words.
func (p *Path) conf() *Config              { return &p.rules.Load().cfg }
func (p *Path) filter() *wordfilter.Filter { return p.rules.Load().words }

// Rules returns the rules the Path applies.
func (p *Path) Rules() Rules {
	rs := p.rules.Load()
	c := rs.cfg
	return Rules{
		MaxMessages: c.MaxMessages, MaxContentRunes: c.MaxContentRunes, MaxNameRunes: c.MaxNameRunes,
		RateLimit: c.RateLimit, RateBurst: c.RateBurst, IPRateLimit: c.IPRateLimit, IPRateBurst: c.IPRateBurst,
		HighRateLimit: c.HighRateLimit, HighRateBurst: c.HighRateBurst,
		ReviewTTLMs: c.ReviewTTL.Milliseconds(), ReviewMax: c.ReviewMax,
		WordsMode: rs.words.Mode(), Words: rs.words.Words(),
	}
}

// ReloadWords reads the Path's own word list file again (SIGHUP); the list
// in use stays on error. A Path that follows logic's rules keeps them: its
// own list is in use again only if it did not.
func (p *Path) ReloadWords() error { return p.own.Reload() }

// rulesTTL is how long the rules PublishRules writes stay in Redis
// unless written again: 10 minutes, or three refresh periods when those
// are longer. A comet keeps the rules it applies when they are gone.
func (p *Path) rulesTTL() time.Duration { return max(10*time.Minute, 3*p.cfg.RulesRefresh) }

// PublishRules writes the Path's rules to Redis for the comets.
func (p *Path) PublishRules(ctx context.Context) error {
	b, err := json.Marshal(p.Rules())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	defer cancel()
	return p.store.SetSendRules(ctx, b, p.rulesTTL())
}

// LoadRules reads the rules logic published and applies them in place of
// the Path's own; it reports whether they changed. With none published
// the Path keeps what it applies. Rules that do not validate are an error
// and are not applied.
func (p *Path) LoadRules(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	defer cancel()
	b, err := p.store.SendRules(ctx)
	if err != nil || b == nil {
		return false, err
	}
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	if bytes.Equal(b, p.rules.Load().applied) {
		return false, nil
	}
	var r Rules
	if err := json.Unmarshal(b, &r); err != nil {
		return false, fmt.Errorf("send rules in Redis: %w", err)
	}
	rs, err := p.ruleSetOf(r)
	if err != nil {
		return false, fmt.Errorf("send rules in Redis: %w", err)
	}
	rs.applied = b
	p.rules.Store(rs)
	return true, nil
}

// ruleSetOf is the Path's own Config with r's rules and word list.
func (p *Path) ruleSetOf(r Rules) (*ruleSet, error) {
	c := p.cfg
	c.MaxMessages, c.MaxContentRunes, c.MaxNameRunes = r.MaxMessages, r.MaxContentRunes, r.MaxNameRunes
	c.RateLimit, c.RateBurst, c.IPRateLimit, c.IPRateBurst = r.RateLimit, r.RateBurst, r.IPRateLimit, r.IPRateBurst
	c.HighRateLimit, c.HighRateBurst = r.HighRateLimit, r.HighRateBurst
	c.ReviewTTL, c.ReviewMax = time.Duration(r.ReviewTTLMs)*time.Millisecond, r.ReviewMax
	c.BlockedWords = wordfilter.Config{Mode: r.WordsMode, Words: r.Words}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	words, err := wordfilter.New(c.BlockedWords)
	if err != nil {
		return nil, err
	}
	return &ruleSet{cfg: c, words: words}, nil
}

// KeepRules runs until ctx ends: it publishes the Path's rules (publish
// true: logic) or follows logic's (false: a comet) now and then every
// Config.RulesRefresh (0: only now). A failure is logged and tried again
// at the next turn.
func (p *Path) KeepRules(ctx context.Context, publish bool) {
	var t <-chan time.Time
	if p.cfg.RulesRefresh > 0 {
		tk := time.NewTicker(p.cfg.RulesRefresh)
		defer tk.Stop()
		t = tk.C
	}
	for {
		if publish {
			if err := p.PublishRules(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("send rules not written to Redis", zap.Error(err))
			}
		} else {
			p.FollowRules(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t:
		}
	}
}

// FollowRules is LoadRules with its outcome logged.
func (p *Path) FollowRules(ctx context.Context) {
	changed, err := p.LoadRules(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		p.log.Warn("send rules not read from Redis; the rules in use stay", zap.Error(err))
	case changed:
		r := p.Rules()
		p.log.Info("send rules of logic applied", zap.Float64("rate_limit", r.RateLimit),
			zap.String("blocked_words", r.WordsMode), zap.Int("words", len(r.Words)))
	}
}
