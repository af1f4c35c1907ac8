package comet

import (
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/density"
	"github.com/danmaku/danmaku/internal/config"
)

// maxRoomsPerConn bounds Config.MaxRoomsPerConn: every room of a connection
// is a registration in Redis and a position in its writer.
const maxRoomsPerConn = 256

// Config configures a comet. Every field has a default in DefaultConfig and a
// line in configs/comet.yaml.
type Config struct {
	// ID names this comet in Redis (routes and lease). Empty means the host
	// name, reduced to the id alphabet.
	ID string `yaml:"id" help:"comet id in Redis; empty: host name + \"-\" + internal port"`
	// Listen is the public address browsers connect to (/ws, /healthz).
	Listen string `yaml:"listen" help:"public: /ws, /healthz; all-in-one: loopback only, browsers use logic.listen"`
	// InternalListen is the address job pushes to (/push, /metrics,
	// /healthz). It must not be reachable from the internet: the default
	// is loopback, a deployment whose jobs run elsewhere sets a private
	// address.
	InternalListen string `yaml:"internal_listen" help:"private: /push (job), /metrics, /healthz; loopback by default, set a private address when jobs run on other hosts"`
	// Advertise is the push address published in the lease. Empty means the
	// internal listener's address, with 127.0.0.1 for an unspecified host.
	Advertise string `yaml:"advertise" help:"push address published in the lease; empty: host name + internal port"`
	// Secret authenticates job's pushes (Authorization: Bearer <secret>).
	Secret string `yaml:"secret" help:"push secret shared with job.push_secret (Authorization: Bearer), 16+ bytes in the role binaries, which refuse the shipped placeholder (any change-me value) at start (all-in-one: the placeholder means a random value per process)"`
	// Auth is off (viewers are anonymous or name themselves with uid) or
	// jwt: /ws needs a JWT (token query parameter or Authorization:
	// Bearer), checked with the auth section; its rooms claim bounds the
	// rooms the viewer may join.
	Auth string `yaml:"auth" help:"off: anyone may watch; jwt: /ws requires a JWT (token=... or Authorization: Bearer), joins limited to its rooms"`
	// SocketSend makes the comet binary take send frames (send.go): it
	// then writes to Kafka (the kafka section) with the checks of the send
	// path, under the rules logic writes to Redis (sendpath.Rules; its send
	// section's until they are read). The all-in-one binary always takes
	// them, through logic's own send path.
	SocketSend bool `yaml:"socket_send" help:"take {\"op\":\"send\"} frames from viewers and write to Kafka (needs kafka.brokers; checks under logic's send rules, read from Redis); all-in-one: always on"`
	// AllowedOrigins lists the Origin values a browser may connect from
	// ("https://example.com", or "*" for any). Empty means same host only;
	// requests without an Origin header (non-browser clients) are accepted.
	AllowedOrigins []string `yaml:"allowed_origins" help:"empty: same host only (see allow_host_origin); [\"*\"]: any; or exact origins (scheme included)"`
	// AllowHostOrigin lets the same-host check (AllowedOrigins empty)
	// accept a page whose Origin names the request's Host by a DNS name.
	// Off, only pages on an IP address or localhost pass it: a DNS name may
	// be rebound to this comet's address by its owner (DNS rebinding), so a
	// deployment under a name lists its origin in AllowedOrigins instead.
	AllowHostOrigin bool `yaml:"allow_host_origin" help:"with allowed_origins empty: also accept a page whose origin is the Host header's DNS name (off: only IP addresses and localhost; list named origins in allowed_origins, which refuses DNS rebinding)"`
	// MaxConnsPerIP bounds the open connections of one remote IP; 0 means
	// no limit.
	MaxConnsPerIP int `yaml:"max_conns_per_ip" help:"0: no limit; IPv6 addresses count per network of ipv6_prefix"`
	// IPv6Prefix is the prefix length of the IPv6 networks MaxConnsPerIP
	// counts: a client holds a whole /64 as a rule, so counting single
	// addresses would not bound it (logic's address limits count /64s).
	IPv6Prefix int `yaml:"ipv6_prefix" help:"max_conns_per_ip counts IPv6 clients per network of this prefix length (like logic's address limits: 64); 128: per address"`
	// OpsRate and OpsBurst bound the room ops one connection sends (join,
	// sub, unsub; a resume is a join or sub): a token bucket of OpsBurst
	// refilled at OpsRate a second. An op beyond it gets the error frame
	// rate_limited with retryAfterMs; the connection stays. The rooms of
	// the URL do not count.
	OpsRate  float64 `yaml:"ops_rate" help:"room ops (join, sub, unsub) one connection may send per second after its burst; beyond: error frame rate_limited with retryAfterMs; 0: no limit"`
	OpsBurst int     `yaml:"ops_burst" help:"room ops one connection may send at once before ops_rate applies"`
	// MaxFrameBytes is the largest client frame; a bigger one closes the
	// connection with 1009.
	MaxFrameBytes int64 `yaml:"max_frame_bytes" help:"larger client frame: close 1009"`
	// MaxPushBytes is the largest push body accepted on the internal
	// listener.
	MaxPushBytes int64 `yaml:"max_push_bytes" help:"largest push body"`
	// QueueSize is the number of frames a viewer may have waiting. A queue
	// that overflows drops its msgs frames and the viewer is caught up from
	// the room's ring once its writer is free; a viewer whose gap the ring
	// no longer holds is disconnected as a slow consumer (4008).
	QueueSize int `yaml:"queue_size" help:"frames a viewer may have waiting; overflow: caught up from the ring, or close 4008 beyond it"`
	// RingSize is how many recent messages the comet keeps per room: they
	// serve resumes, history on join and slow viewers' catch-ups without
	// Redis, and their ids drop redelivered messages. A room with no local
	// viewer drops its ring after half a minute.
	RingSize int `yaml:"ring_size" help:"most recent messages kept per room (resume, history on join, slow-viewer catch-up, redelivery filter); memory: up to this many messages per room with viewers"`
	// RingSpan bounds the age of what the ring keeps: a message accepted
	// more than RingSpan before the room's newest leaves it (the newest
	// max(history_on_join, 100) stay whatever their age). A hot room keeps
	// the last RingSpan of messages, up to RingSize; a quiet one a few. It
	// matches job.history_span, so a resume the ring cannot serve is one
	// the history cannot either. 0 keeps RingSize messages per room.
	RingSpan time.Duration `yaml:"ring_span" help:"age bound of the ring: messages accepted more than this before the room's newest leave it (the newest max(history_on_join, 100) stay); 0: ring_size messages per room"`
	// MaxRoomsPerConn bounds the rooms one connection holds at once (sub);
	// a sub beyond it gets the error frame too_many_rooms.
	MaxRoomsPerConn int `yaml:"max_rooms_per_conn" help:"rooms one connection may hold at once (sub); beyond: error frame too_many_rooms, the connection stays"`
	// HistoryOnJoin is how many of the room's last messages a fresh join
	// gets after its welcome (one replay frame); 0 sends none.
	HistoryOnJoin int `yaml:"history_on_join" help:"last messages sent to a viewer after its welcome on a fresh join; 0: none"`
	// GapCheck is how often the heads of quiet rooms (no push for that
	// long) are read from Redis, so a lost push is repaired without a
	// later one; 0 turns the check off.
	GapCheck time.Duration `yaml:"gap_check" help:"how often rooms without a recent push have their timeline head read (one pipeline) and gaps repaired; 0: never"`
	// WriteWait bounds one write to a viewer: a viewer that takes longer to
	// accept a frame (it stopped reading) is disconnected.
	WriteWait time.Duration `yaml:"write_wait" help:"bound of one write to a viewer; a viewer that stops reading is cut after it"`
	// SendBuffer is the kernel send buffer of each viewer socket (SO_SNDBUF;
	// Linux reserves twice it); 0 keeps the system's auto-tuned buffer.
	SendBuffer int `yaml:"send_buffer" help:"kernel send buffer per viewer socket in bytes (SO_SNDBUF, the kernel reserves twice it); 0: system default (auto-tuned, up to megabytes)"`
	// PingPeriod is how often viewers are pinged; it is the heartbeatMs of
	// the welcome frame.
	PingPeriod time.Duration `yaml:"ping_period" help:"ping interval = heartbeatMs of the welcome frame"`
	// PongWait is how long a viewer may stay silent (no pong, no frame)
	// before it is closed. It must exceed PingPeriod.
	PongWait time.Duration `yaml:"pong_wait" help:"silence after which a viewer is closed"`
	// OnlinePeriod is how often each room's viewer count over all comets
	// is sent to its viewers (an "online" frame, only when it changed);
	// 0 turns the frames off.
	OnlinePeriod time.Duration `yaml:"online_period" help:"how often each room's viewer count is sent to its viewers (online frame, only when it changed); 0: never"`
	// DensityTiers are the caps (normal messages a second per room,
	// ascending) a viewer's density request maps to, besides every
	// message; each batch is encoded once per tier with viewers.
	DensityTiers []int `yaml:"density_tiers" help:"density caps a viewer may ask for (normal messages a second per room, ascending, at most 7); a request maps to the largest cap not above it (the smallest below all); every batch is encoded once per tier in use"`
	// DensityHotRate makes rooms above this many messages a second serve
	// the viewers that asked for no density the DensityHotCap tier; 0
	// never.
	DensityHotRate float64 `yaml:"density_hot_rate" help:"messages a second above which a room serves viewers that asked for no density the density_hot_cap tier; 0: never"`
	DensityHotCap  int     `yaml:"density_hot_cap" help:"the cap of hot rooms (density_hot_rate) for viewers that asked for no density"`
	// DensityFlush is how often a capped tier that is thinning its room
	// sends what it keeps: one frame per interval instead of one per
	// batch (high-priority messages and a viewer's own still go out at
	// once); 0 sends every batch.
	DensityFlush time.Duration `yaml:"density_flush" help:"how often a capped tier thinning its room sends the messages it keeps, in one frame (high-priority messages and a viewer's own go out at once); 0: with every batch"`
	// Compression negotiates permessage-deflate with viewers that offer it
	// (browsers do). A frame is compressed once per tier and batch and the
	// compressed bytes are written to every viewer of the tier, so the CPU
	// it adds per delivery is small against what it saves on the wire
	// (docs/protocol.md, Compression).
	Compression bool `yaml:"compression" help:"permessage-deflate with viewers that offer it (browsers do); each frame is compressed once per tier and batch, a quarter of the bytes on the wire for about the same CPU per delivery"`
	// LeaseRenew is how often the comet renews its lease; LeaseTTL is the
	// lease lifetime (about three renew intervals).
	LeaseRenew time.Duration `yaml:"lease_renew" help:"how often the comet renews its lease comet:{id}"`
	LeaseTTL   time.Duration `yaml:"lease_ttl" help:"lease lifetime (at least twice lease_renew); job stops pushing to a comet whose lease expired"`
	// ReconcileInterval is how often the comet makes Redis agree with the
	// viewers it holds (anti-entropy): routes it lacks are added, routes of
	// connections it no longer holds are removed, its counts set right.
	// It is the backstop for changes the comet cannot see: each lease
	// renewal already reconciles when Redis lists another number of routes
	// for the comet or a registry call failed since the last pass. A pass
	// reads every route of the comet (about 40 ms of CPU for 15,000), so it
	// is not run more often than it has to be.
	ReconcileInterval time.Duration `yaml:"reconcile_interval" help:"how often the comet makes Redis agree with the viewers it holds (missing routes added, stale ones removed) whatever it saw; a lease renewal does it too when the route count differs or a registry call failed"`
	// RedisTimeout bounds every registry call.
	RedisTimeout time.Duration `yaml:"redis_timeout" help:"bound of every registry call"`
	// RegistryWorkers is the number of goroutines doing registry calls for
	// connections, so readers never wait on Redis themselves.
	RegistryWorkers int `yaml:"registry_workers" help:"goroutines doing registry calls, so readers never wait on Redis"`
	// ShutdownTimeout bounds a graceful shutdown.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"bound of a graceful shutdown"`
	// CanaryMaxAge is how old the newest delivery canary of a partition
	// may grow before /readyz fails (canary.go); 0: the canary never
	// affects readiness.
	CanaryMaxAge time.Duration `yaml:"canary_max_age" help:"/readyz fails while the newest delivery canary of some partition is older than this (once a first canary arrived); 0: canaries do not affect readiness"`
}

// DefaultConfig returns the defaults. Secret is the placeholder job's
// default shares; a deployment sets its own.
func DefaultConfig() Config {
	return Config{
		Secret:            config.PlaceholderSecret,
		Listen:            ":8080",
		InternalListen:    "127.0.0.1:8081",
		Auth:              config.AuthOff,
		MaxConnsPerIP:     256,
		IPv6Prefix:        64,
		OpsRate:           5,
		OpsBurst:          20,
		MaxFrameBytes:     4096,
		MaxPushBytes:      4 << 20,
		QueueSize:         64,
		RingSize:          65536,
		RingSpan:          30 * time.Second,
		MaxRoomsPerConn:   8,
		HistoryOnJoin:     20,
		GapCheck:          time.Second,
		WriteWait:         10 * time.Second,
		SendBuffer:        64 << 10,
		PingPeriod:        25 * time.Second,
		PongWait:          60 * time.Second,
		OnlinePeriod:      10 * time.Second,
		DensityTiers:      []int{10, 30, 60},
		Compression:       true,
		DensityHotCap:     30,
		DensityFlush:      time.Second,
		LeaseRenew:        5 * time.Second,
		LeaseTTL:          15 * time.Second,
		ReconcileInterval: 5 * time.Minute,
		RedisTimeout:      2 * time.Second,
		RegistryWorkers:   16,
		ShutdownTimeout:   10 * time.Second,
		CanaryMaxAge:      30 * time.Second,
	}
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.ID != "" && danmaku.CheckID("id", c.ID) != nil:
		return config.Invalid("id", "%v", danmaku.CheckID("id", c.ID))
	case c.Listen == "":
		return config.Invalid("listen", "must not be empty")
	case c.InternalListen == "":
		return config.Invalid("internal_listen", "must not be empty")
	case config.CheckSecretLen("secret", c.Secret) != nil:
		return config.CheckSecretLen("secret", c.Secret)
	case c.MaxFrameBytes < 64:
		return config.Invalid("max_frame_bytes", "must be at least 64")
	case c.MaxPushBytes < 1024:
		return config.Invalid("max_push_bytes", "must be at least 1024")
	case c.QueueSize < 1:
		return config.Invalid("queue_size", "must be at least 1")
	case c.RingSize < 16 || c.RingSize > 1<<20:
		return config.Invalid("ring_size", "must be between 16 and 1048576")
	case c.MaxRoomsPerConn < 1 || c.MaxRoomsPerConn > maxRoomsPerConn:
		return config.Invalid("max_rooms_per_conn", "must be between 1 and %d", maxRoomsPerConn)
	case c.RingSpan < 0:
		return config.Invalid("ring_span", "must not be negative")
	case c.HistoryOnJoin < 0 || c.HistoryOnJoin > c.RingSize:
		return config.Invalid("history_on_join", "must be between 0 and ring_size (%d)", c.RingSize)
	case c.GapCheck < 0:
		return config.Invalid("gap_check", "must not be negative")
	case c.SendBuffer < 0:
		return config.Invalid("send_buffer", "must not be negative")
	case c.SendBuffer > 0 && c.SendBuffer < 4096:
		return config.Invalid("send_buffer", "must be 0 or at least 4096")
	case c.WriteWait <= 0:
		return config.Invalid("write_wait", "must be positive")
	case c.PingPeriod <= 0:
		return config.Invalid("ping_period", "must be positive")
	case c.PongWait <= c.PingPeriod:
		return config.Invalid("pong_wait", "must exceed ping_period")
	case c.OnlinePeriod < 0:
		return config.Invalid("online_period", "must not be negative")
	case c.LeaseRenew <= 0:
		return config.Invalid("lease_renew", "must be positive")
	case c.LeaseTTL < 2*c.LeaseRenew:
		return config.Invalid("lease_ttl", "must be at least twice lease_renew")
	case c.ReconcileInterval <= 0:
		return config.Invalid("reconcile_interval", "must be positive")
	case c.RedisTimeout <= 0:
		return config.Invalid("redis_timeout", "must be positive")
	case c.RegistryWorkers < 1:
		return config.Invalid("registry_workers", "must be at least 1")
	case c.ShutdownTimeout <= 0:
		return config.Invalid("shutdown_timeout", "must be positive")
	case c.CanaryMaxAge < 0:
		return config.Invalid("canary_max_age", "must not be negative")
	}
	if _, err := density.NewTiers(c.DensityTiers); err != nil {
		return config.Invalid("density_tiers", "%v", err)
	}
	switch {
	case c.DensityHotRate < 0:
		return config.Invalid("density_hot_rate", "must not be negative")
	case c.DensityHotCap < 0:
		return config.Invalid("density_hot_cap", "must not be negative")
	case c.DensityFlush < 0 || c.DensityFlush > 10*time.Second:
		return config.Invalid("density_flush", "must be between 0 and 10s")
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	return config.CheckAuthMode("auth", c.Auth)
}

// validateLimits checks the per-client limits.
func (c *Config) validateLimits() error {
	switch {
	case c.MaxConnsPerIP < 0:
		return config.Invalid("max_conns_per_ip", "must not be negative")
	case c.IPv6Prefix < 1 || c.IPv6Prefix > 128:
		return config.Invalid("ipv6_prefix", "must be between 1 and 128")
	case c.OpsRate < 0:
		return config.Invalid("ops_rate", "must not be negative")
	case c.OpsRate > 0 && c.OpsBurst < 1:
		return config.Invalid("ops_burst", "must be at least 1")
	}
	return nil
}
