package client

import (
	"encoding/json"

	"github.com/danmaku/danmaku"
)

// Kind says what an Event reports.
type Kind string

// The kinds of events a Viewer delivers.
const (
	// Connected: a connection to URL is open (its rooms' welcomes follow).
	Connected Kind = "connected"
	// Welcome: a room was joined or resumed; Welcome holds the frame.
	Welcome Kind = "welcome"
	// Messages: new messages of Room, oldest first, with their positions;
	// Replay marks stored ones (history on join, a resume's recovery, a
	// catch-up). Ids delivered before are left out.
	Messages Kind = "msgs"
	// Deleted: a moderator deleted the messages IDs of Room.
	Deleted Kind = "del"
	// Gap: messages of Room may have been missed for good (Gap says why);
	// the viewer continues from the new epoch and position.
	Gap Kind = "gap"
	// StateChanged: Room's settings (its modes) are State, newer than
	// those the viewer held: from the room's first welcome that carries
	// them, or a moderator changed them.
	StateChanged Kind = "state"
	// PinChanged: Room's pin is Pin, or nil when it was taken away (an
	// unpin, or a welcome without it after a reconnect). A pin's end at
	// its Until sends no event: Viewer.Pinned leaves it out by itself.
	PinChanged Kind = "pin"
	// Online: Room's viewer count over all comets changed to Online.
	Online Kind = "online"
	// UserNotices and Broadcasts: notices to this connection's user, and
	// to every viewer (Notices; each id once).
	UserNotices Kind = "user"
	Broadcasts  Kind = "all"
	// Unsubscribed: an Unsubscribe of Room was confirmed.
	Unsubscribed Kind = "unsubscribed"
	// Refused: the comet refused an op (Err is an *Error with the code and
	// the room). A room refused as forbidden, banned or beyond the room
	// limit is no longer held.
	Refused Kind = "error"
	// Disconnected: the connection to URL ended (Err says how); the
	// viewer reconnects after a backoff.
	Disconnected Kind = "disconnected"
	// Closed: the viewer stopped for good, by Close or a ban of its last
	// room (close 4003, Err); the events channel is closed after it.
	Closed Kind = "closed"
	// Other: a frame of an op this package does not know, in Raw.
	Other Kind = "other"
)

// Event is one thing a Viewer reports. Kind says which fields are set.
type Event struct {
	Kind    Kind
	Room    string
	URL     string
	Welcome *danmaku.Welcome
	Msgs    []danmaku.Message
	Epoch   string
	Replay  bool
	IDs     []string
	Gap     *GapInfo
	State   *danmaku.RoomState
	Pin     *danmaku.Pin
	Online  int64
	Notices []danmaku.Notice
	Err     error
	Raw     json.RawMessage
}

// GapInfo describes a Gap: the viewer held Room at position Pos of epoch
// Epoch, and the room continues at ServerPos of ServerEpoch.
type GapInfo struct {
	// Reason is "resume" (the comet could not replay what the viewer
	// missed: recovered false) or "epoch" (a live frame of a new epoch:
	// the room's history was lost).
	Reason      string
	Epoch       string
	Pos         int64
	ServerEpoch string
	ServerPos   int64
}
