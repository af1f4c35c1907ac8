package sendpath

import (
	"time"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/kafkax"
	"github.com/danmaku/danmaku/internal/wordfilter"
)

// Config is the send path's configuration: the bounds of a send, its rate
// limits, the blocked words, and the batching and timeouts of its Redis
// checks and Kafka produce. It sits inline in the logic section
// (logic.rate_limit, ...), and every door for comments applies it.
type Config struct {
	// NodeID goes into every generated message id so two logic instances
	// never produce the same id in the same millisecond. -1 picks a random
	// id at start-up (fine for a handful of instances; set distinct values
	// 0..65535 in a larger deployment).
	NodeID int `yaml:"node_id" help:"0..65535, goes into generated message ids; -1 = random at start-up"`

	// MaxMessages is the most messages one send may carry.
	MaxMessages int `yaml:"max_messages" help:"messages per request"`
	// MaxContentRunes is the longest comment, in Unicode code points.
	MaxContentRunes int `yaml:"max_content_runes" help:"characters (code points) per comment"`
	// MaxNameRunes is the longest user name, in Unicode code points.
	MaxNameRunes int `yaml:"max_name_runes" help:"characters (code points) per user name"`

	// RateLimit refills this many messages per second per user ...
	RateLimit float64 `yaml:"rate_limit" help:"messages per second per user (token refill)"`
	// ... up to RateBurst, the most messages a user may send at once. It
	// must be at least MaxMessages, or a full request could never pass.
	RateBurst int `yaml:"rate_burst" help:"bucket size; must be >= max_messages"`

	// IPRateLimit and IPRateBurst are a second bucket per client address
	// (IPv6: per /64), checked in the same Redis round trip as the user's,
	// so rotating user ids from one client does not multiply its budget.
	// 0 turns it off.
	IPRateLimit float64 `yaml:"ip_rate_limit" help:"messages per second per client address (IPv6: per /64); 0: no address limit"`
	IPRateBurst int     `yaml:"ip_rate_burst" help:"address bucket size; must be >= max_messages"`
	// HighRateLimit and HighRateBurst bound the high-priority messages of
	// one room (a bucket in Redis shared by every logic instance), whoever
	// sends them: a flood of them cannot make a room's window useless.
	// Beyond them a send is 429 with Retry-After.
	HighRateLimit float64 `yaml:"high_rate_limit" help:"high-priority messages per second per room (token refill), every sender together"`
	HighRateBurst int     `yaml:"high_rate_burst" help:"high-priority messages a room takes at once; also the most per request"`

	// BlockedWords is the blocked-word list and what to do on a match.
	BlockedWords wordfilter.Config `yaml:"blocked_words"`
	// RulesRefresh is how often logic writes its rules of the send path
	// (Rules) to Redis again, and how often a comet that takes sends over
	// its sockets reads them; both also do at start, and on SIGHUP.
	RulesRefresh time.Duration `yaml:"rules_refresh" help:"logic: write the send rules (limits, rate limits, blocked words) to Redis this often; a comet with socket_send: read and apply logic's this often, in place of this section's (also at start and on SIGHUP; 0: only then)"`

	// ReviewTTL is how long a comment waits in its room's review queue
	// (RoomState.Review) before it expires unreviewed; ReviewMax how many
	// a room's queue holds (beyond, a match is refused as without review).
	ReviewTTL time.Duration `yaml:"review_ttl" help:"how long a comment held for review waits for a moderator before it expires (and is never shown)"`
	ReviewMax int           `yaml:"review_max" help:"the most comments a room's review queue holds; beyond, a blocked word is refused as in a room without review"`

	// RedisTimeout bounds the rate-limit and online-count calls; after it
	// the request fails with 503.
	RedisTimeout time.Duration `yaml:"redis_timeout" help:"rate limit / online count; then 503"`
	// AdmitBatchWait is how long a batch of send checks (ban, mutes, rate
	// limits) stays open for more requests before its one Redis script call;
	// requests arriving while a batch is in flight join the next batch
	// anyway. It trades a little of each send's latency for larger batches
	// when sends are spread out, and costs throughput where few clients
	// send back to back (each waits for its answer). Measured back to back
	// (BENCHMARKS.md, scenario SS), all servers' CPU per message at 1,000
	// single-message sends a second / accepted sends a second of 32
	// clients: 3 ms 506 µs / 4,478; 1 ms 638 µs / 6,579; 0 711 µs /
	// 6,327. With BatchTimeout 0 too (scenario CF), 0 (the default) gave
	// 4 clients a p50 of 1.0 ms against 3.7 ms with 1 ms and 500 µs, and 32
	// and 256 clients 6,073 and 6,979 sends a second against 4,648 and
	// 6,405: the batches that form while one is in flight are enough under
	// load, and a wait only delays sends when there is none. 0 sends at
	// once.
	AdmitBatchWait time.Duration `yaml:"admit_batch_wait" help:"gather send checks this long into one Redis call (0: no wait)"`
	// AdmitBatchMax is the most requests in one batch of send checks.
	AdmitBatchMax int `yaml:"admit_batch_max" help:"most send checks per Redis call"`
	// ProduceTimeout bounds waiting for Kafka to acknowledge a request's
	// messages; retriable failures (a lost connection, a moved leader) are
	// retried until it ends, then the request fails with 503.
	ProduceTimeout time.Duration `yaml:"produce_timeout" help:"wait for Kafka acks; then 503"`
	// BatchTimeout is how long the producer lingers for more messages
	// before a produce request when none is in flight. The messages of
	// concurrent requests that arrive while a produce request is in flight
	// go out together in the next one whatever this value, so a linger
	// only trades a lone request's latency for fewer produce requests at
	// low load (with AdmitBatchWait above). 0 (the default) sends at
	// once.
	BatchTimeout time.Duration `yaml:"batch_timeout" help:"producer linger before a produce request when none is in flight (0: send at once)"`
	// BatchSize is the most messages in one produce request (all
	// partitions together); one request's messages always go whole.
	BatchSize int `yaml:"batch_size" help:"most messages per produce request"`
}

// DefaultConfig returns the defaults (configs/logic.yaml lists them).
func DefaultConfig() Config {
	return Config{
		NodeID:          -1,
		MaxMessages:     50,
		MaxContentRunes: 200,
		MaxNameRunes:    32,
		RateLimit:       10,
		RateBurst:       50,
		IPRateLimit:     50,
		IPRateBurst:     250,
		HighRateLimit:   5,
		HighRateBurst:   20,
		BlockedWords:    wordfilter.Config{Mode: wordfilter.ModeOff},
		ReviewTTL:       24 * time.Hour,
		ReviewMax:       1000,
		RulesRefresh:    5 * time.Second,
		RedisTimeout:    500 * time.Millisecond,
		AdmitBatchWait:  0,
		AdmitBatchMax:   256,
		ProduceTimeout:  3 * time.Second,
		BatchTimeout:    0,
		BatchSize:       1000,
	}
}

// Validate checks the send path's keys.
func (c *Config) Validate() error {
	switch {
	case c.NodeID < -1 || c.NodeID > MaxNodeID:
		return config.Invalid("node_id", "must be -1 (random) or 0..%d", MaxNodeID)
	case c.MaxMessages < 1:
		return config.Invalid("max_messages", "must be at least 1")
	case c.ReviewTTL < time.Second:
		return config.Invalid("review_ttl", "must be at least 1s")
	case c.RulesRefresh < 0:
		return config.Invalid("rules_refresh", "must not be negative (0: only at start and on SIGHUP)")
	case c.ReviewMax < 1 || c.ReviewMax > 100000:
		return config.Invalid("review_max", "must be 1 to 100000")
	case c.MaxContentRunes < 1:
		return config.Invalid("max_content_runes", "must be at least 1")
	case c.MaxNameRunes < 1:
		return config.Invalid("max_name_runes", "must be at least 1")
	case c.RateLimit <= 0:
		return config.Invalid("rate_limit", "must be positive")
	case c.RateBurst < c.MaxMessages:
		return config.Invalid("rate_burst", "must be at least max_messages (%d)", c.MaxMessages)
	case c.IPRateLimit < 0:
		return config.Invalid("ip_rate_limit", "must not be negative (0: off)")
	case c.IPRateLimit > 0 && c.IPRateBurst < c.MaxMessages:
		return config.Invalid("ip_rate_burst", "must be at least max_messages (%d)", c.MaxMessages)
	case c.HighRateLimit <= 0:
		return config.Invalid("high_rate_limit", "must be positive")
	case c.HighRateBurst < 1:
		return config.Invalid("high_rate_burst", "must be at least 1")
	case c.RedisTimeout <= 0:
		return config.Invalid("redis_timeout", "must be positive")
	case c.AdmitBatchWait < 0 || c.AdmitBatchWait > time.Second:
		return config.Invalid("admit_batch_wait", "must be between 0 and 1s")
	case c.AdmitBatchMax < 1:
		return config.Invalid("admit_batch_max", "must be at least 1")
	case c.ProduceTimeout <= 0:
		return config.Invalid("produce_timeout", "must be positive")
	case c.BatchTimeout < 0 || c.BatchTimeout > time.Second:
		return config.Invalid("batch_timeout", "must be between 0 and 1s")
	case c.BatchSize < 1:
		return config.Invalid("batch_size", "must be at least 1")
	}
	return nil
}

// Limits are the validation bounds c sets.
func (c Config) Limits() Limits {
	return Limits{MaxMessages: c.MaxMessages, MaxContent: c.MaxContentRunes, MaxName: c.MaxNameRunes, MaxHigh: c.HighRateBurst}
}

// ProducerConfig is the batching of the producer a door builds for its
// sends.
func (c Config) ProducerConfig() kafkax.ProducerConfig {
	return kafkax.ProducerConfig{
		Linger:       c.BatchTimeout,
		MaxMessages:  c.BatchSize,
		WriteTimeout: c.ProduceTimeout,
		DialTimeout:  min(c.ProduceTimeout, 5*time.Second),
	}
}
