package logic

import (
	"time"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/internal/wordfilter"
)

// Config is the "logic" section of the configuration.
type Config struct {
	// Listen is the HTTP listen address of the logic binary.
	Listen string `yaml:"listen" help:"logic's HTTP address; all-in-one: the one public port"`
	// AdminAddr, when set, is a second listener of the logic binary that
	// serves the admin API, the notices and /metrics, which the public
	// listener then does not serve (404), so a proxy or firewall in front
	// of Listen cannot expose them by mistake. Empty keeps them on Listen.
	AdminAddr string `yaml:"admin_addr" help:"separate listener for /logic/admin/*, /logic/push/user, /logic/broadcast and /metrics (e.g. 127.0.0.1:8091); empty: on logic.listen"`
	// AllowedOrigins lists the browser origins that may call the API from
	// a page served elsewhere (CORS): exact origins, or "*" for any. Empty
	// allows only pages of the API's own host, as comet.allowed_origins.
	AllowedOrigins []string `yaml:"allowed_origins" help:"browser origins allowed to call the API (CORS; preflight answered): empty: same host only; [\"*\"]: any; or exact origins"`
	// NodeID goes into every generated message id so two logic instances
	// never produce the same id in the same millisecond. -1 picks a random
	// id at start-up (fine for a handful of instances; set distinct values
	// 0..65535 in a larger deployment).
	NodeID int `yaml:"node_id" help:"0..65535, goes into generated message ids; -1 = random at start-up"`

	// MaxBodyBytes caps the request body; larger bodies get 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes" help:"larger bodies get 413"`
	// MaxMessages is the most messages one POST /logic/send may carry.
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
	// TrustedProxies lists the proxies (CIDRs or addresses) whose
	// X-Forwarded-For is believed: the client address is the rightmost
	// forwarded address that is not a trusted proxy. A request from any
	// other peer is limited by the peer's own address.
	TrustedProxies []string `yaml:"trusted_proxies" help:"CIDRs of proxies whose X-Forwarded-For names the client (empty: the peer address is the client)"`

	// HistoryRateLimit and HistoryRateBurst bound GET /logic/history per
	// client address (IPv6: per /64), in the memory of each logic
	// instance: a read beyond them is 429 with Retry-After. 0 turns the
	// limit off.
	HistoryRateLimit float64 `yaml:"history_rate_limit" help:"GET /logic/history requests per second per client address (IPv6: per /64), per logic instance; 0: no limit"`
	HistoryRateBurst int     `yaml:"history_rate_burst" help:"history requests a client address may make at once"`
	// HistoryMaxBytes bounds the messages of one history answer, in bytes
	// of their JSON; an answer cut by it says "more": true, and its
	// through is the since of the rest.
	HistoryMaxBytes int `yaml:"history_max_bytes" help:"most bytes of messages in one GET /logic/history answer (at least 16384); a cut answer has \"more\":true"`

	// ArchiveDSN names the archive's database the VOD API reads
	// (GET /logic/vod/...): postgres://... or sqlite:PATH, the archive's
	// archive.dsn. Empty: the VOD API answers 404.
	ArchiveDSN string `yaml:"archive_dsn" help:"the archive's database for GET /logic/vod/... (archive.dsn); empty: no VOD API; all-in-one: archive.dsn"`
	// VODSegmentCap is the most comments one segment answer holds; beyond
	// it the comments are sampled (priority ones always kept) and the
	// answer counts those left out.
	VODSegmentCap int `yaml:"vod_segment_cap" help:"most comments in one GET /logic/vod/segment answer; beyond it a deterministic sample (priority kept), the rest counted"`
	// VODRateLimit and VODRateBurst bound GET /logic/vod/... per client
	// address, like history_rate_limit (0: off).
	VODRateLimit float64 `yaml:"vod_rate_limit" help:"GET /logic/vod/... requests per second per client address, per logic instance; 0: no limit"`
	VODRateBurst int     `yaml:"vod_rate_burst" help:"VOD requests a client address may make at once"`
	// VODLiveCache is how long an answer about a live stream is served
	// from memory before the database is read again (answers about ended
	// streams never change and are kept). 0: every such request reads the
	// database.
	VODLiveCache time.Duration `yaml:"vod_live_cache" help:"how long logic serves a live stream's VOD answer from memory before reading it again (one database read per period, whatever the request rate); 0: every request reads"`

	// Auth is off (the body says who sends) or jwt: /logic/send needs
	// Authorization: Bearer <JWT>, checked with the auth section, and the
	// user id and name come from the token.
	Auth string `yaml:"auth" help:"off: the body's userId is trusted; jwt: Authorization: Bearer <JWT> required (see the auth section)"`
	// AdminSecret guards the admin API (/logic/admin/*, Authorization:
	// Bearer). Empty turns the API off: every admin request gets 403.
	AdminSecret string `yaml:"admin_secret" help:"Bearer secret of /logic/admin/* (16+ bytes); empty: admin API off (403)"`
	// BlockedWords is the blocked-word list and what to do on a match.
	BlockedWords wordfilter.Config `yaml:"blocked_words"`

	// RedisTimeout bounds the rate-limit and online-count calls; after it
	// the request fails with 503.
	RedisTimeout time.Duration `yaml:"redis_timeout" help:"rate limit / online count; then 503"`
	// AdmitBatchWait is how long a batch of send checks (ban, mutes, rate
	// limits) stays open for more requests before its one Redis script call;
	// requests arriving while a batch is in flight join the next batch
	// anyway. It trades a little of each send's latency for larger batches
	// when sends are spread out: at 1,000 single-message sends a second
	// from many users, 3 ms (the default) against 0 took Redis from 4.5 to
	// 2.8 commands per message and the servers' CPU per message by a
	// quarter, for 2 ms more POST latency at the median. 0 sends at once.
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
	// low load. 0 sends at once.
	BatchTimeout time.Duration `yaml:"batch_timeout" help:"producer linger before a produce request when none is in flight (0: send at once)"`
	// BatchSize is the most messages in one produce request (all
	// partitions together); one request's messages always go whole.
	BatchSize int `yaml:"batch_size" help:"most messages per produce request"`
	// CreateTopic creates the Kafka topic at start-up when it is missing,
	// with the kafka section's partitions and replication.
	CreateTopic bool `yaml:"create_topic" help:"create kafka.topic at start-up when missing"`
	// CanaryInterval is how often a delivery canary is written to every
	// partition of the room topic (see canary.go); 0 turns canaries off.
	CanaryInterval time.Duration `yaml:"canary_interval" help:"one delivery canary per partition of the topic this often (job pushes it to every comet, no viewer sees it); 0: off"`

	// ReadHeaderTimeout, ReadTimeout and IdleTimeout are the HTTP server's.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" help:"HTTP request header timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout" help:"per API request (WebSocket connections have none)"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" help:"keep-alive connections"`
	// ShutdownTimeout bounds draining in-flight requests on shutdown.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"drain in-flight requests on SIGTERM"`
}

// DefaultConfig returns the defaults; configs/logic.yaml lists the same
// values.
func DefaultConfig() Config {
	return Config{
		Listen:            ":8090",
		NodeID:            -1,
		MaxBodyBytes:      64 << 10,
		MaxMessages:       50,
		MaxContentRunes:   200,
		MaxNameRunes:      32,
		RateLimit:         10,
		RateBurst:         50,
		IPRateLimit:       50,
		IPRateBurst:       250,
		HighRateLimit:     5,
		HighRateBurst:     20,
		HistoryRateLimit:  5,
		HistoryRateBurst:  20,
		HistoryMaxBytes:   256 << 10,
		VODSegmentCap:     6000,
		VODRateLimit:      20,
		VODRateBurst:      60,
		VODLiveCache:      time.Second,
		Auth:              config.AuthOff,
		BlockedWords:      wordfilter.Config{Mode: wordfilter.ModeOff},
		RedisTimeout:      500 * time.Millisecond,
		AdmitBatchWait:    3 * time.Millisecond,
		AdmitBatchMax:     256,
		ProduceTimeout:    3 * time.Second,
		BatchTimeout:      500 * time.Microsecond,
		BatchSize:         1000,
		CreateTopic:       true,
		CanaryInterval:    time.Second,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ShutdownTimeout:   10 * time.Second,
	}
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.NodeID < -1 || c.NodeID > sendpath.MaxNodeID:
		return config.Invalid("node_id", "must be -1 (random) or 0..%d", sendpath.MaxNodeID)
	case c.MaxBodyBytes < 256:
		return config.Invalid("max_body_bytes", "must be at least 256")
	case c.MaxMessages < 1:
		return config.Invalid("max_messages", "must be at least 1")
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
	case c.HistoryRateLimit < 0:
		return config.Invalid("history_rate_limit", "must not be negative (0: off)")
	case c.HistoryRateLimit > 0 && c.HistoryRateBurst < 1:
		return config.Invalid("history_rate_burst", "must be at least 1")
	case c.HistoryMaxBytes < minHistoryBytes:
		return config.Invalid("history_max_bytes", "must be at least %d", minHistoryBytes)
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
	case c.ReadHeaderTimeout <= 0:
		return config.Invalid("read_header_timeout", "must be positive")
	case c.ReadTimeout <= 0:
		return config.Invalid("read_timeout", "must be positive")
	case c.IdleTimeout <= 0:
		return config.Invalid("idle_timeout", "must be positive")
	case c.ShutdownTimeout <= 0:
		return config.Invalid("shutdown_timeout", "must be positive")
	case c.CanaryInterval < 0:
		return config.Invalid("canary_interval", "must not be negative")
	}
	if err := config.CheckAuthMode("auth", c.Auth); err != nil {
		return err
	}
	if c.AdminSecret != "" {
		if err := config.CheckSecret("admin_secret", c.AdminSecret); err != nil {
			return err
		}
	}
	if err := c.validateVOD(); err != nil {
		return err
	}
	_, err := parseProxies(c.TrustedProxies)
	return err
}

// sendConfig is the send path's part of the section.
func (c Config) sendConfig() sendpath.Config {
	return sendpath.Config{
		Limits: sendpath.Limits{MaxMessages: c.MaxMessages, MaxContent: c.MaxContentRunes, MaxName: c.MaxNameRunes,
			MaxHigh: c.HighRateBurst},
		RateLimit: c.RateLimit, RateBurst: c.RateBurst, IPRateLimit: c.IPRateLimit, IPRateBurst: c.IPRateBurst,
		HighRateLimit: c.HighRateLimit, HighRateBurst: c.HighRateBurst,
		RedisTimeout: c.RedisTimeout, ProduceTimeout: c.ProduceTimeout,
		AdmitBatchWait: c.AdmitBatchWait, AdmitBatchMax: c.AdmitBatchMax,
	}
}

// authOn reports whether senders must present a JWT.
func (c *Config) authOn() bool { return c.Auth == config.AuthJWT }

// WriteTimeout is the HTTP server's write timeout: a request may wait for
// Redis and then Kafka, so it leaves room for both.
func (c Config) WriteTimeout() time.Duration {
	return c.RedisTimeout + c.ProduceTimeout + 5*time.Second
}
