package config

import (
	"strings"
	"time"
)

// PlaceholderSecret is the push secret job and comet default to and the
// shipped configs carry. The role binaries refuse it (CheckSecret), so a
// deployment sets its own; the all-in-one binary replaces it with a random
// value per process.
const PlaceholderSecret = "change-me-push-secret"

// MinSecretLen is the shortest shared secret (push, admin) the role
// binaries accept.
const MinSecretLen = 16

// CheckSecretLen is the one length rule for a shared secret named key
// (comet.secret, job.push_secret, logic.admin_secret), with one message,
// checked by the sections themselves: at least MinSecretLen bytes.
func CheckSecretLen(key, secret string) error {
	if len(secret) < MinSecretLen {
		return Invalid(key, "must be at least %d bytes, got %d (openssl rand -hex 16)", MinSecretLen, len(secret))
	}
	return nil
}

// CheckSecret is the role binaries' rule for a shared secret named key:
// CheckSecretLen, and not a placeholder (any value starting with
// "change-me", which is what the shipped examples carry).
func CheckSecret(key, secret string) error {
	if strings.HasPrefix(strings.ToLower(secret), "change-me") {
		return Invalid(key, "is a placeholder (%q); set your own secret of at least %d bytes (openssl rand -hex 16)", secret, MinSecretLen)
	}
	return CheckSecretLen(key, secret)
}

// Auth modes of logic.auth and comet.auth.
const (
	AuthOff = "off" // no token: the client says who it is
	AuthJWT = "jwt" // a JWT checked against the auth section
)

// CheckAuthMode validates an auth mode setting ("" means off).
func CheckAuthMode(key, mode string) error {
	switch mode {
	case "", AuthOff, AuthJWT:
		return nil
	}
	return Invalid(key, "must be off or jwt, not %q", mode)
}

// Redis configures the connection to Redis, standalone or cluster.
type Redis struct {
	// Addrs: one address for a standalone server, several for a cluster
	// (go-redis UniversalClient picks the client kind). Empty in the
	// all-in-one binary means "start an embedded Redis".
	Addrs        []string      `yaml:"addrs" help:"one address: standalone; several: cluster; all-in-one: empty starts an embedded Redis"`
	Password     string        `yaml:"password" help:"AUTH password"`
	DB           int           `yaml:"db" help:"database number (standalone only)"`
	DialTimeout  time.Duration `yaml:"dial_timeout" help:"connect timeout"`
	ReadTimeout  time.Duration `yaml:"read_timeout" help:"socket read timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout" help:"socket write timeout"`
	PoolSize     int           `yaml:"pool_size" help:"connections per node"`
	// BufferSize is the read and the write buffer of each pooled
	// connection. Commands and replies of the service are small; a comet,
	// whose fixed memory matters next to thousands of idle viewers, uses 4 KiB.
	BufferSize int `yaml:"buffer_size" help:"read and write buffer per pooled connection (comet: 4096)"`
}

// DefaultRedis returns the Redis defaults.
func DefaultRedis() Redis {
	return Redis{
		Addrs:        []string{"127.0.0.1:6379"},
		DialTimeout:  2 * time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		PoolSize:     64,
		BufferSize:   32 << 10,
	}
}

// Validate checks the section.
func (r *Redis) Validate() error {
	switch {
	case r.DB < 0:
		return Invalid("db", "must not be negative")
	case r.DialTimeout <= 0:
		return Invalid("dial_timeout", "must be positive")
	case r.ReadTimeout <= 0:
		return Invalid("read_timeout", "must be positive")
	case r.WriteTimeout <= 0:
		return Invalid("write_timeout", "must be positive")
	case r.PoolSize <= 0:
		return Invalid("pool_size", "must be positive")
	case r.BufferSize < 512:
		return Invalid("buffer_size", "must be at least 512")
	}
	return nil
}

// RequireRedis is the role binaries' rule for redis.addrs: they need a real
// server (only the all-in-one binary embeds one for an empty list).
func RequireRedis(r Redis) error {
	if len(r.Addrs) == 0 {
		return Invalid("redis.addrs", "must not be empty")
	}
	return nil
}

// RequireKafka is RequireRedis for kafka.brokers.
func RequireKafka(k Kafka) error {
	if len(k.Brokers) == 0 {
		return Invalid("kafka.brokers", "must not be empty")
	}
	return nil
}

// Kafka configures the Kafka brokers and the room topic.
type Kafka struct {
	// Brokers: empty in the all-in-one binary means "start an embedded broker".
	Brokers    []string `yaml:"brokers" help:"bootstrap brokers; all-in-one: empty starts an embedded broker"`
	Topic      string   `yaml:"topic" help:"the room topic (record key = room id)"`
	Partitions int      `yaml:"partitions" help:"used when logic creates the topic"`
	// Replication is the replication factor used when the topic is created.
	Replication int    `yaml:"replication" help:"used when logic creates the topic"`
	Group       string `yaml:"group" help:"job's consumer group (unused by logic)"`
}

// DefaultKafka returns the Kafka defaults.
func DefaultKafka() Kafka {
	return Kafka{
		Brokers:     []string{"127.0.0.1:9092"},
		Topic:       "danmaku-room",
		Partitions:  16,
		Replication: 1,
		Group:       "danmaku-job",
	}
}

// Validate checks the section.
func (k *Kafka) Validate() error {
	switch {
	case k.Topic == "":
		return Invalid("topic", "must not be empty")
	case k.Partitions < 1:
		return Invalid("partitions", "must be at least 1")
	case k.Replication < 1:
		return Invalid("replication", "must be at least 1")
	case k.Group == "":
		return Invalid("group", "must not be empty")
	}
	return nil
}

// Log configures the zap logger.
type Log struct {
	Level string `yaml:"level" help:"debug, info, warn, error"` // debug, info, warn, error
	// Format is "json" (production) or "console" (development).
	Format string `yaml:"format" help:"json or console"`
	// Sampling keeps the first SampleFirst entries per message and second,
	// then one in SampleThereafter; 0 disables sampling.
	SampleFirst      int `yaml:"sample_first" help:"per message and second, then 1 in sample_thereafter"`
	SampleThereafter int `yaml:"sample_thereafter" help:"then 1 in this many"`
}

// DefaultLog returns the logging defaults.
func DefaultLog() Log {
	return Log{Level: "info", Format: "json", SampleFirst: 100, SampleThereafter: 100}
}

// Validate checks the section.
func (l *Log) Validate() error {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		return Invalid("level", "must be debug, info, warn or error, not %q", l.Level)
	}
	switch l.Format {
	case "json", "console":
	default:
		return Invalid("format", "must be json or console, not %q", l.Format)
	}
	if l.SampleFirst < 0 || l.SampleThereafter < 0 {
		return Invalid("sample_first", "sampling values must not be negative")
	}
	return nil
}
