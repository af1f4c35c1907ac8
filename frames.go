package danmaku

import "encoding/json"

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
	OpDensity      = "density"
	// OpState carries a room's settings (RoomState): in the welcome's
	// state field, then as a state frame whenever they change.
	OpState = "state"
	// OpPin and OpUnpin pin a message or a text to a room and take it
	// away (Pin): viewers get them as frames, and the pin in force in the
	// welcome.
	OpPin   = "pin"
	OpUnpin = "unpin"
	// OpSend sends comments over the viewer's socket, as POST /logic/send
	// does; OpAck answers it once Kafka acknowledged them.
	OpSend = "send"
	OpAck  = "ack"
)

// ClientFrame is a frame a viewer sends: join, sub, unsub, density, send
// or ping.
type ClientFrame struct {
	Op   string `json:"op"`
	Room string `json:"room,omitempty"`
	// Since and Epoch ask a join or sub to resume: every message of the
	// room's timeline Epoch after position Since.
	Since *int64 `json:"since,omitempty"`
	Epoch string `json:"epoch,omitempty"`
	// Max is a density op's cap: at most this many normal messages a
	// second of Room (of every room of the connection when Room is
	// absent); 0 asks for every message.
	Max *int `json:"max,omitempty"`
	// Msgs are a send's comments to Room, each with its optional msgId
	// (idempotency key): the messages of POST /logic/send. Who sends is
	// the connection's user, never the frame's.
	Msgs []SendMessage `json:"msgs,omitempty"`
	// Priority asks a send for the high lane (1), as POST /logic/send's
	// priority: a token with the moderator or priority role only.
	Priority Priority `json:"priority,omitempty"`
	// Ref is the client's number for a send, echoed by its ack or error
	// frame.
	Ref int64 `json:"ref,omitempty"`
}

// AckFrame answers a send once Kafka acknowledged its messages: IDs are
// their ids in order, as POST /logic/send answers them.
type AckFrame struct {
	Op  string   `json:"op"`
	Ref int64    `json:"ref"`
	IDs []string `json:"ids"`
}

// DensityFrame answers a density op, and tells a viewer its cap when the
// welcome could not: Max is the tier the comet now serves the viewer in
// Room (0: every message), which may be below what it asked for (the
// comet's tiers, see docs/protocol.md).
type DensityFrame struct {
	Op   string `json:"op"`
	Room string `json:"room,omitempty"`
	Max  int    `json:"max"`
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
	// Density is the tier the viewer is served in the room: at most this
	// many normal messages a second; absent (0) for every message.
	Density int `json:"density,omitempty"`
	// State is the room's settings as the comet knows them when the viewer
	// joined; absent while every mode is off and nothing was ever set.
	State *RoomState `json:"state,omitempty"`
	// Pin is the room's pinned message when the viewer joined; absent
	// when none is pinned or the pin ended.
	Pin *Pin `json:"pin,omitempty"`
	// Send is true when the comet takes send frames on this connection
	// (docs/protocol.md, Sending over the socket); absent: send with
	// POST /logic/send.
	Send bool `json:"send,omitempty"`
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
	// Ref is the refused send's ref; Field names its offending input, as
	// an HTTP error body's field does.
	Ref   int64  `json:"ref,omitempty"`
	Field string `json:"field,omitempty"`
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

// ServerFrame is any frame a comet sends a viewer, decoded by UnmarshalJSON
// into the type of its op: one of the pointers is set, none for a pong or
// an op this version does not know (a client skips those). Go clients
// read frames with it, the test viewers among them.
type ServerFrame struct {
	Op           string
	Welcome      *Welcome
	Msgs         *Batch
	Del          *DelFrame
	Notices      *NoticeFrame // op user or all
	Error        *ErrorFrame
	Online       *OnlineFrame
	Unsubscribed *Unsubscribed
	Density      *DensityFrame
	State        *StateFrame
	Pin          *PinFrame // op pin or unpin
	Ack          *AckFrame
}

// frame returns the value f holds, nil when none.
func (f *ServerFrame) frame() any {
	switch {
	case f.Welcome != nil:
		return f.Welcome
	case f.Msgs != nil:
		return f.Msgs
	case f.Del != nil:
		return f.Del
	case f.Notices != nil:
		return f.Notices
	case f.Error != nil:
		return f.Error
	case f.Online != nil:
		return f.Online
	case f.Unsubscribed != nil:
		return f.Unsubscribed
	case f.Density != nil:
		return f.Density
	case f.State != nil:
		return f.State
	case f.Pin != nil:
		return f.Pin
	case f.Ack != nil:
		return f.Ack
	}
	return nil
}

// MarshalJSON encodes the frame f holds ({"op":...} alone when none).
func (f ServerFrame) MarshalJSON() ([]byte, error) {
	if v := f.frame(); v != nil {
		return json.Marshal(v)
	}
	return json.Marshal(struct {
		Op string `json:"op"`
	}{f.Op})
}

// UnmarshalJSON decodes a frame into the type of its op.
func (f *ServerFrame) UnmarshalJSON(b []byte) error {
	*f = ServerFrame{Op: opOf(b)}
	switch f.Op {
	case OpWelcome:
		f.Welcome = new(Welcome)
	case OpMsgs:
		f.Msgs = new(Batch)
	case OpDel:
		f.Del = new(DelFrame)
	case OpUser, OpAll:
		f.Notices = new(NoticeFrame)
	case OpError:
		f.Error = new(ErrorFrame)
	case OpOnline:
		f.Online = new(OnlineFrame)
	case OpUnsubscribed:
		f.Unsubscribed = new(Unsubscribed)
	case OpDensity:
		f.Density = new(DensityFrame)
	case OpState:
		f.State = new(StateFrame)
	case OpPin, OpUnpin:
		f.Pin = new(PinFrame)
	case OpAck:
		f.Ack = new(AckFrame)
	case "":
		return Errorf(EINVALID, "op", "frame without op: %.100s", b)
	default:
		return nil
	}
	if err := json.Unmarshal(b, f.frame()); err != nil {
		return Errorf(EINVALID, "body", "decode %s frame: %v", f.Op, err)
	}
	return nil
}

// Ops of the frames only the SSE transport (GET /sse) sends.
const (
	// OpStream opens an SSE stream: it names the stream for the ops the
	// viewer posts (POST /sse?stream=ID).
	OpStream = "stream"
	// OpClose ends an SSE stream with the close code a WebSocket would
	// have received.
	OpClose = "close"
)

// StreamFrame is the first event of an SSE stream.
type StreamFrame struct {
	Op string `json:"op"`
	// ID names the stream in POST /sse?stream=ID (join, sub, unsub,
	// ping); whoever holds it acts as the stream's viewer, so it is as
	// secret as the stream itself.
	ID string `json:"id"`
}

// CloseFrame is the last event of an SSE stream that the comet ended:
// Code is the WebSocket close code (1001 going away, 4003 banned, 4008
// slow consumer, ...), Reason its text.
type CloseFrame struct {
	Op     string `json:"op"`
	Code   int    `json:"code"`
	Reason string `json:"reason,omitempty"`
}

// RoomState is a room's settings: the modes that decide who may send and
// how often. Moderators (the token role) are exempt from every mode.
// Every change gets the next Ver, so a reader holding two states keeps
// the higher; a room never set is the zero RoomState (every mode off).
type RoomState struct {
	// Ver counts the changes of the room's settings, from 1.
	Ver int64 `json:"ver"`
	// SlowSeconds: one message per user per this many seconds (0: off);
	// a faster send is refused with 429 slow_mode and Retry-After.
	SlowSeconds int `json:"slowSeconds,omitempty"`
	// MembersOnly: only tokens with the member role may send; others are
	// refused with 403 members_only.
	MembersOnly bool `json:"membersOnly,omitempty"`
	// UniqueSeconds: a message whose normalised content repeats one sent
	// to the room in the last this many seconds is refused with 409
	// duplicate_content (0: off).
	UniqueSeconds int `json:"uniqueSeconds,omitempty"`
	// DelaySeconds: messages of non-moderators are held this long in job
	// before they get their positions (0: off, at most MaxDelaySeconds),
	// so a moderator can delete one before any viewer sees it.
	// High-priority messages are not held.
	DelaySeconds int `json:"delaySeconds,omitempty"`
	// Review: a message matching a blocked word goes to the room's review
	// queue instead of being refused (or masked); a moderator approves it
	// (it is delivered then) or rejects it.
	Review bool `json:"review,omitempty"`
}

// MaxDelaySeconds bounds RoomState.DelaySeconds: job holds the room's
// messages in memory, and its partition's commits, that long.
const MaxDelaySeconds = 60

// MaxModeSeconds bounds RoomState's durations: one day.
const MaxModeSeconds = 86400

// Check reports whether st is a valid state; the error is EINVALID and
// names the field with prefix.
func (st *RoomState) Check(prefix string) error {
	for _, f := range []struct {
		name   string
		v, max int
	}{{"slowSeconds", st.SlowSeconds, MaxModeSeconds}, {"uniqueSeconds", st.UniqueSeconds, MaxModeSeconds},
		{"delaySeconds", st.DelaySeconds, MaxDelaySeconds}} {
		if f.v < 0 || f.v > f.max {
			return Errorf(EINVALID, prefix+f.name, "want 0 (off) to %d seconds, got %d", f.max, f.v)
		}
	}
	return nil
}

// StateFrame tells viewers of a room that its settings changed.
type StateFrame struct {
	Op    string    `json:"op"`
	Room  string    `json:"room"`
	State RoomState `json:"state"`
}

// Pin is a message or a moderator's text pinned to the top of a room
// until Until (Unix ms): one per room, a new pin replaces the one before.
// Ver orders the room's pins and unpins (the room's settings version
// counter), so a viewer that holds two keeps the higher.
type Pin struct {
	// ID is the pinned message's id, or the pin's own for a text.
	ID      string `json:"id"`
	UID     int64  `json:"uid,omitempty"`
	Name    string `json:"name,omitempty"`
	Content string `json:"content"`
	// Amount is what a paid message paid (in the payer's smallest unit),
	// which made it pinned longer; 0 for others.
	Amount int64 `json:"amount,omitempty"`
	Until  int64 `json:"until"`
	Ver    int64 `json:"ver"`
}

// PinFrame tells viewers of a room that Pin is pinned (op pin) or that the
// pin of id Pin.ID ended early (op unpin: Pin holds the id and the Ver
// only).
type PinFrame struct {
	Op   string `json:"op"`
	Room string `json:"room"`
	Pin  Pin    `json:"pin"`
}
