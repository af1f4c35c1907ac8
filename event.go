package danmaku

import "strconv"

// Ops of moderation events.
const (
	// OpDel deletes messages that went out: comets drop them from their
	// ring and forward the event to the room's viewers as the del frame.
	OpDel = "del"
	// OpBan closes a user's connections to a room: comets close them with
	// close code 4003. Joins while the ban lasts are refused by the
	// registry, not by this event.
	OpBan = "ban"
	// OpStreamStart and OpStreamEnd start and end a stream of the room
	// (a live session whose comments the archive keeps for replay). They
	// are for the archive alone: job consumes them without delivering
	// them, comets never see them (see ForViewers).
	OpStreamStart = "stream_start"
	OpStreamEnd   = "stream_end"
	// OpShadow carries a message of a hidden user (shadow hide): comets
	// hand it to that user's own connections to the room only. It gets
	// no position, is never in the room's history and reaches no other
	// viewer; its ID is the message's id.
	OpShadow = "shadow"
)

// MaxDelIDs is the most message ids one del event carries.
const MaxDelIDs = 100

// Event is a moderation event of one room. It travels like a message:
// logic writes it to the room's partition, job delivers it to every comet
// of the room after the room's messages before it, with the same dedup
// (ID) and the same commit rule (an offset is committed once every comet
// of the room took the event or was left out), and comets act on it. Its
// JSON form is the body job pushes to comets; a del event without ID is
// the del frame viewers receive.
type Event struct {
	Op   string `json:"op"`
	Room string `json:"room"`
	// ID is unique per event: job's dedup key, like a message id.
	ID string `json:"id,omitempty"`
	// IDs are the ids of the messages a del removes.
	IDs []string `json:"ids,omitempty"`
	// User is the user a ban closes out, Until when the ban ends (Unix
	// milliseconds).
	User  string `json:"user,omitempty"`
	Until int64  `json:"until,omitempty"`
	// Epoch and Dels are set by job on a del it pushes: the room's epoch
	// and the number of ids deleted in it, this event's included (see
	// Batch.Dels).
	Epoch string `json:"epoch,omitempty"`
	Dels  int64  `json:"dels,omitempty"`
	// Sv is set by job on every event it pushes: the version of the
	// room's settings (see Batch.Sv).
	Sv int64 `json:"sv,omitempty"`
	// Stream is the stream a stream event starts or ends (an end without
	// it ends the room's live stream), At when (Unix milliseconds).
	Stream string `json:"stream,omitempty"`
	At     int64  `json:"at,omitempty"`
	// State is the new settings of the room a state event (OpState)
	// carries: comets keep them for their joins and forward them to the
	// room's viewers as the state frame.
	State *RoomState `json:"state,omitempty"`
	// Msg is a shadow event's message; User is its sender.
	Msg *Message `json:"msg,omitempty"`
	// Pin is a pin event's pin, or an unpin event's pin id and version.
	Pin *Pin `json:"pin,omitempty"`
}

// Check reports whether ev is a valid event; the error is EINVALID and
// names the field.
func (ev *Event) Check() error {
	if err := CheckID("event.room", ev.Room); err != nil {
		return err
	}
	if err := CheckID("event.id", ev.ID); err != nil {
		return err
	}
	switch ev.Op {
	case OpDel:
		if len(ev.IDs) == 0 || len(ev.IDs) > MaxDelIDs {
			return Errorf(EINVALID, "event.ids", "want 1 to %d message ids, got %d", MaxDelIDs, len(ev.IDs))
		}
		for i, id := range ev.IDs {
			if err := CheckID("event.ids["+strconv.Itoa(i)+"]", id); err != nil {
				return err
			}
		}
	case OpBan:
		if err := CheckID("event.user", ev.User); err != nil {
			return err
		}
		if ev.Until <= 0 {
			return Errorf(EINVALID, "event.until", "must be a time in Unix milliseconds")
		}
	case OpStreamStart, OpStreamEnd:
		if ev.Op == OpStreamStart || ev.Stream != "" {
			if err := CheckID("event.stream", ev.Stream); err != nil {
				return err
			}
		}
		if ev.At <= 0 {
			return Errorf(EINVALID, "event.at", "must be a time in Unix milliseconds")
		}
	case OpShadow:
		if err := CheckID("event.user", ev.User); err != nil {
			return err
		}
		if ev.Msg == nil || ev.Msg.ID != ev.ID || strconv.FormatInt(ev.Msg.UID, 10) != ev.User {
			return Errorf(EINVALID, "event.msg", "a shadow event carries its sender's message, with the event's id")
		}
	case OpPin, OpUnpin:
		if ev.Pin == nil || ev.Pin.Ver < 1 {
			return Errorf(EINVALID, "event.pin", "a pin event needs the pin, with ver from 1")
		}
		if err := CheckID("event.pin.id", ev.Pin.ID); err != nil {
			return err
		}
	case OpState:
		if ev.State == nil || ev.State.Ver < 1 {
			return Errorf(EINVALID, "event.state", "a state event needs the state, with ver from 1")
		}
		return ev.State.Check("event.state.")
	default:
		return Errorf(EINVALID, "event.op", "unknown event op %q", ev.Op)
	}
	return nil
}

// ForViewers reports whether job delivers ev to the room's comets: every
// moderation event does; stream events are for the archive alone.
func (ev *Event) ForViewers() bool {
	return ev.Op != OpStreamStart && ev.Op != OpStreamEnd
}
