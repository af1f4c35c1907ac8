package archive

import (
	"strings"
	"time"

	"github.com/danmaku/danmaku/internal/config"
)

// Config tunes the archive. DefaultConfig gives every field its default.
type Config struct {
	// DSN names the database: postgres://user:pass@host/db (production)
	// or sqlite:PATH (one file, for the all-in-one binary and
	// development).
	DSN string `yaml:"dsn" help:"postgres://... or sqlite:PATH (the archive's database; logic reads the VOD API from it); all-in-one: empty is a temporary SQLite file removed at exit"`
	// Group is the archive's Kafka consumer group: its own, so it reads
	// every record of the room topic beside job's group.
	Group string `yaml:"group" help:"the archive's consumer group on the room topic"`
	// Migrate runs the schema migrations at start (otherwise run
	// `archive migrate` first).
	Migrate bool `yaml:"migrate" help:"run the database migrations at start"`
	// BatchSize is the most records one database write takes; BatchWait
	// how long the first record of a batch waits for more.
	BatchSize int           `yaml:"batch_size" help:"most records per database write"`
	BatchWait time.Duration `yaml:"batch_wait" help:"how long a batch waits for more records after its first"`
	// WriteTimeout bounds one database call; a failed write is retried
	// with backoff (consumption pauses, nothing is committed).
	WriteTimeout time.Duration `yaml:"write_timeout" help:"one database call; failures are retried"`
	// AutoSilence, when set, starts a stream at the first comment of a
	// room without a live stream, and ends a live stream after this long
	// without a comment. 0: streams start and end only through the admin
	// API.
	AutoSilence time.Duration `yaml:"auto_silence" help:"0: streams only through the admin API; else a comment starts one and this much silence ends it"`
	// Retention removes streams that ended longer ago than this (checked
	// hourly). 0 keeps them.
	Retention time.Duration `yaml:"retention" help:"remove streams ended longer ago than this (0: keep)"`
	// PositionsTopic is job's positions topic (job.positions_topic): read
	// in the archive's group to store each comment with the timeline
	// position viewers saw. Empty: positions are not stored.
	PositionsTopic string `yaml:"positions_topic" help:"job's positions topic, to store each comment's timeline position; empty: none stored"`
	// PositionWait is how long a comment waits for its position after
	// job would have released it; one that did not get it by then is
	// written without, and given it when it comes. 0: no wait.
	PositionWait time.Duration `yaml:"position_wait" help:"how long a comment waits for its timeline position before it is written without (then given it when it comes)"`
	// MetricsAddr serves /metrics, /healthz and /readyz of cmd/archive.
	MetricsAddr string `yaml:"metrics_addr" help:"cmd/archive's /metrics, /healthz and /readyz; loopback by default; all-in-one: unused"`

	HeartbeatInterval time.Duration `yaml:"heartbeat_interval" help:"consumer group heartbeat"`
	SessionTimeout    time.Duration `yaml:"session_timeout" help:"a member silent this long leaves the group"`
	RebalanceTimeout  time.Duration `yaml:"rebalance_timeout" help:"how long a rebalance waits for members"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		DSN:               "sqlite:data/archive.db",
		Group:             "danmaku-archive",
		Migrate:           true,
		BatchSize:         2000,
		BatchWait:         100 * time.Millisecond,
		WriteTimeout:      10 * time.Second,
		PositionsTopic:    "danmaku-positions",
		PositionWait:      5 * time.Second,
		MetricsAddr:       "127.0.0.1:8083",
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		RebalanceTimeout:  5 * time.Second,
	}
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.DSN != "" && !strings.HasPrefix(c.DSN, "postgres://") && !strings.HasPrefix(c.DSN, "postgresql://") && !strings.HasPrefix(c.DSN, "sqlite:"):
		return config.Invalid("dsn", "want postgres://... or sqlite:PATH")
	case c.Group == "":
		return config.Invalid("group", "must not be empty")
	case c.BatchSize < 1 || c.BatchSize > 100000:
		return config.Invalid("batch_size", "must be between 1 and 100000, got %d", c.BatchSize)
	case c.BatchWait < time.Millisecond:
		return config.Invalid("batch_wait", "must be at least 1ms, got %v", c.BatchWait)
	case c.WriteTimeout < 100*time.Millisecond:
		return config.Invalid("write_timeout", "must be at least 100ms, got %v", c.WriteTimeout)
	case c.AutoSilence != 0 && c.AutoSilence < time.Second:
		return config.Invalid("auto_silence", "must be 0 (off) or at least 1s, got %v", c.AutoSilence)
	case c.Retention != 0 && c.Retention < time.Hour:
		return config.Invalid("retention", "must be 0 (keep) or at least 1h, got %v", c.Retention)
	case c.PositionWait < 0 || c.PositionWait > time.Minute:
		return config.Invalid("position_wait", "must be from 0 to 1m, got %v", c.PositionWait)
	case c.HeartbeatInterval <= 0 || c.SessionTimeout <= c.HeartbeatInterval:
		return config.Invalid("session_timeout", "must exceed heartbeat_interval (%v)", c.HeartbeatInterval)
	case c.RebalanceTimeout <= 0:
		return config.Invalid("rebalance_timeout", "must be positive")
	}
	return nil
}

// BinaryConfig is the whole configuration of cmd/archive: the archive
// section and the shared sections it reads.
type BinaryConfig struct {
	Log     config.Log   `yaml:"log"`
	Kafka   config.Kafka `yaml:"kafka"`
	Archive Config       `yaml:"archive"`
}

// DefaultBinaryConfig returns the defaults of every section.
func DefaultBinaryConfig() BinaryConfig {
	return BinaryConfig{Log: config.DefaultLog(), Kafka: config.DefaultKafka(), Archive: DefaultConfig()}
}

// Validate checks what the binary needs beyond its sections' own rules.
func (c *BinaryConfig) Validate() error {
	if c.Archive.DSN == "" {
		return config.Invalid("archive.dsn", "must not be empty: postgres://... or sqlite:PATH")
	}
	return config.RequireKafka(c.Kafka)
}
