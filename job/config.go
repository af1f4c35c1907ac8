package job

import (
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/route"
)

// Policies for messages that arrive while a room's cooldown window runs.
const (
	// PolicyCoalesce buffers them and sends them as one batch when the
	// window ends (leading + trailing edge). Nothing is dropped below the
	// overflow limit.
	PolicyCoalesce = "coalesce"
	// PolicyDrop skips them and counts them (reason "cooldown"): one
	// message per room per window.
	PolicyDrop = "drop"
)

// Config tunes the job. DefaultConfig gives every field its default; the
// guard keys default to 60 s dedup marks, a 1 s cooldown and a 5 s lock.
type Config struct {
	// Policy is "coalesce" (default) or "drop".
	Policy string `yaml:"policy" help:"coalesce or drop (drop: skip what arrives inside the window)"`
	// Window is the per-room cooldown: at most one broadcast per room per
	// window. 10ms or more.
	Window time.Duration `yaml:"window" help:"one broadcast per room per window (coalescing); 10ms or more"`
	// Budget is the most messages in one room batch: the per-room budget of
	// a window. A steady rate near Budget per window builds a backlog, so
	// keep it well above the hottest room's rate times the window. What a
	// window brings
	// beyond it waits for the next window (no loss, more delay).
	Budget int `yaml:"budget" help:"most messages in one room batch"`
	// MaxBatchBytes is the most bytes of one room batch's push body: a
	// batch of large messages is split below it, as a batch of many is at
	// Budget. A comet refuses a push over its comet.max_push_bytes (4 MiB
	// by default), so keep this below that limit of every comet.
	MaxBatchBytes int `yaml:"max_batch_bytes" help:"most bytes in one room batch's push body; keep it below every comet's comet.max_push_bytes"`
	// MaxPending caps a room's waiting messages. Beyond it, while the room
	// is being delivered normally, newly arriving messages of that room are
	// dropped and counted (reason "overflow"). While deliveries fail (Redis
	// or every comet down) nothing is dropped: consumption pauses instead.
	MaxPending int `yaml:"max_pending" help:"per room; beyond it new messages are dropped (overflow)"`
	// MaxBuffered caps the messages held in memory over all rooms; at the
	// cap the consumer stops fetching until deliveries catch up.
	MaxBuffered int `yaml:"max_buffered" help:"over all rooms; beyond it fetching pauses"`

	// ProcessedTTL is how long msg:processed keys live: a message's claim,
	// which holds its position, and the mark of a delivered event or
	// notice. A message sent again within it keeps its first position.
	ProcessedTTL time.Duration `yaml:"processed_ttl" help:"msg:processed mark"` // msg:processed mark, 60s
	// ClaimTTL bounds how long a crashed consumer's claims on events and
	// notices delay their redelivery. Must exceed a flush's worst case. An
	// event or notice pushed just before a crash may be pushed again about
	// ClaimTTL later; comets and clients drop it. (A message's claim is
	// final, ProcessedTTL.)
	ClaimTTL time.Duration `yaml:"claim_ttl" help:"how long a crashed consumer's claims delay redelivery"`
	LockTTL  time.Duration `yaml:"lock_ttl" help:"lock:broadcast"` // lock:broadcast, 5s
	// LockRetry is how soon a room whose lock is held elsewhere is tried again.
	LockRetry time.Duration `yaml:"lock_retry" help:"how soon a room whose lock is held elsewhere is tried again"`
	// HistorySize is how many of a room's latest messages Redis keeps with
	// their positions (room:history:{room}), for comets that repair a gap
	// or replay to a resuming viewer and for GET /logic/history.
	HistorySize int `yaml:"history_size" help:"latest messages kept per room for replay and gap repair"`
	// HistorySpan makes a busy room's history hold the messages of its
	// last HistorySpan when they are more than HistorySize (up to 100000):
	// at 1,000 messages a second, HistorySize alone is one second, too
	// little to resume a viewer whose network dropped for two. The span is
	// measured from the room's deliveries by the job that makes them; 0
	// keeps HistorySize.
	HistorySpan time.Duration `yaml:"history_span" help:"a busy room's history also keeps its messages of this last span (up to 100000); 0: history_size only"`
	// HistoryTTL is how long a room's timeline and history live after its
	// last message; a room quiet for longer starts a new epoch.
	HistoryTTL time.Duration `yaml:"history_ttl" help:"a room's history lives this long after its last message"`
	// RetryMin and RetryMax bound the backoff after a failed delivery.
	RetryMin time.Duration `yaml:"retry_min" help:"shortest backoff after a failed delivery"`
	RetryMax time.Duration `yaml:"retry_max" help:"longest backoff after a failed delivery"`

	// PushSecret authenticates pushes to the comets' internal endpoint.
	PushSecret string `yaml:"push_secret" help:"same value as comet.secret, 16+ bytes; the shipped placeholder (any change-me value) is refused at start (all-in-one: ignored, set to comet.secret)"`
	// PushTimeout bounds one push to one comet.
	PushTimeout time.Duration `yaml:"push_timeout" help:"bound of one push to one comet"`
	// PushAttempts is how often a push to one comet is tried within one
	// delivery before the delivery is retried later as a whole.
	PushAttempts int `yaml:"push_attempts" help:"tries of one push to one comet within a delivery"`
	// Quarantine is how long a comet that failed every push attempt, while
	// other comets of the room took the batch, is left out of deliveries.
	// Its share of that batch is counted as dropped (reason "comet_failed").
	Quarantine time.Duration `yaml:"quarantine" help:"a failing comet is left out this long"`
	// GiveUpAfter is how many failed deliveries of a room in a row (every
	// comet of the room failing) are retried; then the batch is counted as
	// dropped (reason "comet_failed") so the room and its partition move on.
	GiveUpAfter int `yaml:"give_up_after" help:"failed deliveries of a room in a row before the batch is dropped (comet_failed)"`

	// Workers is the number of room deliveries in flight at once.
	Workers int `yaml:"workers" help:"room deliveries in flight at once"`
	// CommitInterval is how often consumed offsets are committed.
	CommitInterval time.Duration `yaml:"commit_interval" help:"how often consumed offsets are committed"`
	// CometRefresh is how often the list of live comets is reread.
	CometRefresh time.Duration `yaml:"comet_refresh" help:"how often the list of live comets is reread"`
	// JanitorInterval is how often routes of comets whose lease expired are
	// removed; 0 disables the janitor.
	JanitorInterval time.Duration `yaml:"janitor_interval" help:"how often routes of comets with an expired lease are removed; 0 disables"`

	// Consumer group timing (see shared notes on kafka-go).
	SessionTimeout    time.Duration `yaml:"session_timeout" help:"consumer group session timeout"`
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval" help:"consumer group heartbeat"`
	RebalanceTimeout  time.Duration `yaml:"rebalance_timeout" help:"consumer group rebalance timeout"`
	// MaxWait is how long a fetch request waits for a first record when
	// the member's partitions are idle: the longest poll.
	MaxWait time.Duration `yaml:"max_wait" help:"longest wait of a fetch request for a first record"`
	// FetchLinger is how long a fetch request waits for records to gather
	// after a response that carried several: while the topic is busy each
	// response then carries what this long brought, instead of the one
	// record that was ready, at up to this much more latency. 0: answered
	// at the first record.
	FetchLinger time.Duration `yaml:"fetch_linger" help:"while records flow, a fetch waits this long for more to gather (fewer, fuller fetches); 0: answered at the first record"`

	// DrainTimeout bounds the delivery of buffered messages at shutdown;
	// what is not delivered by then stays uncommitted and is redelivered to
	// the next consumer.
	DrainTimeout time.Duration `yaml:"drain_timeout" help:"bound of delivering buffered messages at shutdown"`

	// RedisTimeout bounds each Redis round trip of a delivery: the guards
	// before the pushes (BeginBroadcast), the marks after them
	// (EndBroadcast), and releasing the lock after a failed push.
	RedisTimeout time.Duration `yaml:"redis_timeout" help:"bound of each Redis round trip of a delivery (guards, marks, unlock)"`
	// WaitReplicas, when above 0, holds a batch until that many replicas of
	// its room's master hold the positions it was given (WAIT, at most
	// ReplicaTimeout); fewer in time is a Redis failure and the batch is
	// retried. With one replica per master a failover then cannot lose a
	// position that was pushed; a master without a live replica holds its
	// rooms' batches until one is back. 0: no wait.
	WaitReplicas int `yaml:"wait_replicas" help:"replicas of a room's master that must hold a batch's positions before it is pushed (0: no wait)"`
	// ReplicaTimeout bounds that wait; it must be below RedisTimeout.
	ReplicaTimeout time.Duration `yaml:"replica_timeout" help:"bound of the wait for wait_replicas; then the batch is retried"`
	// LockRenewTimeout bounds one renewal of a room's lock while pushes run
	// (every lock_ttl/3).
	LockRenewTimeout time.Duration `yaml:"lock_renew_timeout" help:"bound of one lock renewal while pushes run (every lock_ttl/3)"`
	// CommitTimeout bounds one offset commit; a commit that fails is
	// retried with the next one.
	CommitTimeout time.Duration `yaml:"commit_timeout" help:"bound of one offset commit; a failed commit is retried with the next"`
	// CometRefreshTimeout bounds one reread of the live comets.
	CometRefreshTimeout time.Duration `yaml:"comet_refresh_timeout" help:"bound of one reread of the live comets"`
	// JanitorTimeout bounds one janitor pass over the expired comets.
	JanitorTimeout time.Duration `yaml:"janitor_timeout" help:"bound of one janitor pass"`
	// SweepInterval is how often rooms with nothing buffered and no window
	// running are forgotten, which bounds the memory of rooms gone quiet.
	SweepInterval time.Duration `yaml:"sweep_interval" help:"how often rooms gone quiet are forgotten"`

	// PositionsTopic is where job says which positions each delivered
	// batch's messages got (danmaku.Positions, positions.go), for the
	// archive; created with the room topic's partition count. Empty: off.
	PositionsTopic string `yaml:"positions_topic" help:"topic of the positions given to delivered messages, for the archive; empty: off"`

	// Owner names this consumer in dedup claims; empty means a random id.
	Owner string `yaml:"owner" help:"empty: a random id per process"`
	// MetricsAddr is where cmd/job serves /metrics and /healthz.
	MetricsAddr string `yaml:"metrics_addr" help:"cmd/job's /metrics, /healthz and /readyz; loopback by default (\":8082\": every interface); all-in-one: unused, metrics are on the public port"`
}

// maxHistorySize bounds history_size: the history is one Redis list per
// room, and its memory is about this many messages per active room.
const maxHistorySize = 100000

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Policy:              PolicyCoalesce,
		Window:              time.Second,
		Budget:              5000,
		MaxBatchBytes:       3 << 20,
		MaxPending:          20000,
		MaxBuffered:         200000,
		ProcessedTTL:        60 * time.Second,
		ClaimTTL:            5 * time.Second,
		LockTTL:             5 * time.Second,
		LockRetry:           50 * time.Millisecond,
		HistorySize:         route.DefaultHistorySize,
		HistorySpan:         30 * time.Second,
		HistoryTTL:          route.DefaultHistoryTTL,
		RetryMin:            100 * time.Millisecond,
		RetryMax:            2 * time.Second,
		PushSecret:          config.PlaceholderSecret,
		PushTimeout:         time.Second,
		PushAttempts:        2,
		Quarantine:          5 * time.Second,
		GiveUpAfter:         10,
		Workers:             32,
		CommitInterval:      200 * time.Millisecond,
		CometRefresh:        time.Second,
		JanitorInterval:     5 * time.Second,
		SessionTimeout:      6 * time.Second,
		HeartbeatInterval:   500 * time.Millisecond,
		RebalanceTimeout:    5 * time.Second,
		MaxWait:             100 * time.Millisecond,
		FetchLinger:         20 * time.Millisecond,
		DrainTimeout:        5 * time.Second,
		RedisTimeout:        2 * time.Second,
		ReplicaTimeout:      500 * time.Millisecond,
		LockRenewTimeout:    time.Second,
		CommitTimeout:       5 * time.Second,
		CometRefreshTimeout: 2 * time.Second,
		JanitorTimeout:      10 * time.Second,
		SweepInterval:       5 * time.Second,
		PositionsTopic:      "danmaku-positions",
		MetricsAddr:         "127.0.0.1:8082",
	}
}

// Validate checks the section: the guards and the history here, the rest
// in validateDelivery.
func (c *Config) Validate() error {
	switch {
	case c.Policy != PolicyCoalesce && c.Policy != PolicyDrop:
		return config.Invalid("policy", "must be coalesce or drop, not %q", c.Policy)
	case c.Window < 10*time.Millisecond:
		return config.Invalid("window", "must be at least 10ms, got %v", c.Window)
	case c.Budget < 1:
		return config.Invalid("budget", "must be at least 1")
	case c.MaxBatchBytes < 64<<10:
		return config.Invalid("max_batch_bytes", "must be at least 64KiB (65536), got %d", c.MaxBatchBytes)
	case c.MaxPending < c.Budget:
		return config.Invalid("max_pending", "must be at least the budget (%d)", c.Budget)
	case c.MaxBuffered < c.MaxPending:
		return config.Invalid("max_buffered", "must be at least max_pending (%d)", c.MaxPending)
	case c.ProcessedTTL < time.Second:
		return config.Invalid("processed_ttl", "must be at least 1s")
	case c.LockTTL < 100*time.Millisecond:
		return config.Invalid("lock_ttl", "must be at least 100ms")
	case c.HistorySize < 1 || c.HistorySize > maxHistorySize:
		return config.Invalid("history_size", "must be between 1 and %d, got %d", maxHistorySize, c.HistorySize)
	case c.HistorySpan < 0:
		return config.Invalid("history_span", "must not be negative")
	case c.HistoryTTL < time.Second:
		return config.Invalid("history_ttl", "must be at least 1s, got %v", c.HistoryTTL)
	}
	return c.validateDelivery()
}

// validateDelivery checks the settings of pushes, retries, the consumer and
// the timeouts.
func (c *Config) validateDelivery() error {
	switch {
	case c.PushTimeout <= 0:
		return config.Invalid("push_timeout", "must be positive")
	case c.PushAttempts < 1:
		return config.Invalid("push_attempts", "must be at least 1")
	case c.ClaimTTL <= c.PushTimeout*time.Duration(c.PushAttempts):
		return config.Invalid("claim_ttl", "must exceed push_timeout x push_attempts (%v)", c.PushTimeout*time.Duration(c.PushAttempts))
	case c.LockRetry <= 0 || c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return config.Invalid("retry_min", "lock_retry and retry_min must be positive, retry_max >= retry_min")
	case c.Quarantine <= 0:
		return config.Invalid("quarantine", "must be positive")
	case c.GiveUpAfter < 1:
		return config.Invalid("give_up_after", "must be at least 1")
	case c.Workers < 1:
		return config.Invalid("workers", "must be at least 1")
	case c.CommitInterval <= 0:
		return config.Invalid("commit_interval", "must be positive")
	case c.CometRefresh <= 0:
		return config.Invalid("comet_refresh", "must be positive")
	case c.JanitorInterval < 0:
		return config.Invalid("janitor_interval", "must not be negative")
	case c.MaxWait < time.Millisecond || c.FetchLinger < 0 || c.FetchLinger > c.MaxWait:
		return config.Invalid("max_wait", "must be at least 1ms, and fetch_linger between 0 and max_wait")
	case c.DrainTimeout <= 0:
		return config.Invalid("drain_timeout", "must be positive")
	case config.CheckSecretLen("push_secret", c.PushSecret) != nil:
		return config.CheckSecretLen("push_secret", c.PushSecret)
	case c.PositionsTopic != "" && danmaku.CheckID("positions_topic", c.PositionsTopic) != nil:
		return config.Invalid("positions_topic", "must be a topic name of [A-Za-z0-9_.-], got %q", c.PositionsTopic)
	case c.WaitReplicas < 0:
		return config.Invalid("wait_replicas", "must not be negative")
	case c.WaitReplicas > 0 && (c.ReplicaTimeout <= 0 || c.ReplicaTimeout >= c.RedisTimeout):
		return config.Invalid("replica_timeout", "must be positive and below redis_timeout (%v)", c.RedisTimeout)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"redis_timeout", c.RedisTimeout}, {"lock_renew_timeout", c.LockRenewTimeout},
		{"commit_timeout", c.CommitTimeout}, {"comet_refresh_timeout", c.CometRefreshTimeout},
		{"janitor_timeout", c.JanitorTimeout}, {"sweep_interval", c.SweepInterval},
	} {
		if d.v <= 0 {
			return config.Invalid(d.field, "must be positive")
		}
	}
	return nil
}
