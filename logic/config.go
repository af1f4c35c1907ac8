package logic

import (
	"time"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/sendpath"
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

	// Config is the send path's part: the checks of a send (validation,
	// rate limits, blocked words), its batching and its timeouts, shared
	// with every other door for comments.
	sendpath.Config `yaml:",inline"`

	// MaxBodyBytes caps the request body; larger bodies get 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes" help:"larger bodies get 413"`
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
	// streams never change and are kept). 0: nothing is kept, and each
	// request reads the database or shares the read of the same answer in
	// flight.
	VODLiveCache time.Duration `yaml:"vod_live_cache" help:"how long logic serves a live stream's VOD answer from memory before reading it again (one database read per period, whatever the request rate); 0: not kept, a request reads or shares the read in flight"`

	// Auth is off (the body says who sends) or jwt: /logic/send needs
	// Authorization: Bearer <JWT>, checked with the auth section, and the
	// user id and name come from the token.
	Auth string `yaml:"auth" help:"off: the body's userId is trusted; jwt: Authorization: Bearer <JWT> required (see the auth section)"`
	// AdminSecret guards the admin API (/logic/admin/*, Authorization:
	// Bearer). Empty turns the API off: every admin request gets 403.
	AdminSecret string `yaml:"admin_secret" help:"Bearer secret of /logic/admin/* (16+ bytes); empty: admin API off (403)"`
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
		Config:            sendpath.DefaultConfig(),
		Listen:            ":8090",
		MaxBodyBytes:      64 << 10,
		HistoryRateLimit:  5,
		HistoryRateBurst:  20,
		HistoryMaxBytes:   256 << 10,
		VODSegmentCap:     6000,
		VODRateLimit:      20,
		VODRateBurst:      60,
		VODLiveCache:      time.Second,
		Auth:              config.AuthOff,
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
	case c.MaxBodyBytes < 256:
		return config.Invalid("max_body_bytes", "must be at least 256")
	case c.HistoryRateLimit < 0:
		return config.Invalid("history_rate_limit", "must not be negative (0: off)")
	case c.HistoryRateLimit > 0 && c.HistoryRateBurst < 1:
		return config.Invalid("history_rate_burst", "must be at least 1")
	case c.HistoryMaxBytes < minHistoryBytes:
		return config.Invalid("history_max_bytes", "must be at least %d", minHistoryBytes)
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
	if err := c.Config.Validate(); err != nil {
		return err
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

// authOn reports whether senders must present a JWT.
func (c *Config) authOn() bool { return c.Auth == config.AuthJWT }

// WriteTimeout is the HTTP server's write timeout: a request may wait for
// Redis and then Kafka, so it leaves room for both.
func (c Config) WriteTimeout() time.Duration {
	return c.RedisTimeout + c.ProduceTimeout + 5*time.Second
}
