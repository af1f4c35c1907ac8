package danmaku

// The WebSocket frames between a comet and its viewers (docs/protocol.md),
// apart from the msgs frame (Batch) and the notice frames (NoticeFrame).

// Ops of viewer frames.
const (
	OpJoin         = "join"
	OpSub          = "sub"
	OpUnsub        = "unsub"
	OpPing         = "ping"
	OpPong         = "pong"
	OpWelcome      = "welcome"
	OpUnsubscribed = "unsubscribed"
	OpOnline       = "online"
	OpError        = "error"
)

// ClientFrame is a frame a viewer sends: join, sub, unsub or ping.
type ClientFrame struct {
	Op   string `json:"op"`
	Room string `json:"room,omitempty"`
	// Since and Epoch ask a join or sub to resume: every message of the
	// room's timeline Epoch after position Since.
	Since *int64 `json:"since,omitempty"`
	Epoch string `json:"epoch,omitempty"`
}

// Welcome is sent after every successful join or sub.
type Welcome struct {
	Op          string `json:"op"`
	ConnID      string `json:"connId"`
	Room        string `json:"room"`
	Online      int64  `json:"online"`
	HeartbeatMs int64  `json:"heartbeatMs"`
	// Epoch and Pos are the room's timeline head as the comet knows it
	// when the viewer joined: the last position it was given (in the
	// history frame that follows, or before). "" and 0: no timeline yet.
	Epoch string `json:"epoch"`
	Pos   int64  `json:"pos"`
	// Recovered answers a join with since: true when every message after
	// since follows, false when the comet sends the recent history instead
	// (another epoch, or since older than the kept history).
	Recovered *bool `json:"recovered,omitempty"`
}

// ErrorFrame reports a client frame that could not be served; the
// connection stays open unless a close follows. Room names the room the
// refused join, sub or event was about (absent when there is none, or the
// room id itself was invalid). Code is one of error.go's.
type ErrorFrame struct {
	Op      string `json:"op"`
	Room    string `json:"room,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfterMs tells a client whose op was rate_limited when the next
	// one may come.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
}

// Unsubscribed confirms an unsub: no frame of the room follows it.
type Unsubscribed struct {
	Op   string `json:"op"`
	Room string `json:"room"`
}

// DelFrame tells viewers of a room which of its messages were deleted.
type DelFrame struct {
	Op   string   `json:"op"`
	Room string   `json:"room"`
	IDs  []string `json:"ids"`
}

// OnlineFrame carries a room's viewer count over all comets.
type OnlineFrame struct {
	Op     string `json:"op"`
	Room   string `json:"room"`
	Online int64  `json:"online"`
}
