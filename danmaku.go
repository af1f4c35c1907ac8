// Package danmaku holds the domain types shared by every role of the
// broadcast service: the message a viewer sees, the envelope that carries it
// through Kafka, the batch pushed to comets, id validation and the error type
// with codes. It imports nothing of this module; the adapters (route, logic,
// job, comet) import it.
package danmaku

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// EnvelopeVersion is the version written into every message Envelope,
// EventEnvelopeVersion the one written into moderation events and
// NoticeEnvelopeVersion the one written into notices (messages to a user or to
// everyone). Readers accept any version up to CanaryEnvelopeVersion (canary.go) and
// reject newer ones, so a rolling upgrade deploys readers (job) before
// writers (logic); an older reader skips the shapes it does not know as
// invalid records (counted) and keeps delivering messages, whose shape did
// not change.
const (
	EnvelopeVersion       = 1
	EventEnvelopeVersion  = 2
	NoticeEnvelopeVersion = 3
)

// Message is one comment as a viewer receives it. The JSON names are part of
// the WebSocket wire contract.
type Message struct {
	// ID is unique per message and stable across retries and redeliveries:
	// logic assigns a time-ordered id unless the client gave an idempotency key.
	ID string `json:"id"`
	// UID is the sender's numeric user id.
	UID int64 `json:"uid"`
	// Name is the sender's display name.
	Name string `json:"name"`
	// Content is the comment text.
	Content string `json:"content"`
	// TS is the server time in Unix milliseconds at which logic accepted it.
	TS int64 `json:"ts"`
	// Priority is the message's lane: PriorityNormal (left out of the
	// JSON, so a normal message's wire form is unchanged) or PriorityHigh,
	// which only trusted senders may set (see docs/protocol.md).
	Priority Priority `json:"priority,omitempty"`
	// Mod marks a message sent by a moderator of its room (a token with
	// the moderator role that allows the room); false, left out of the
	// JSON, for everybody else.
	Mod bool `json:"mod,omitempty"`
	// Pos is the message's position in its room's timeline: 1 for the first
	// message of an epoch, one more for each message after it, in the order
	// viewers are meant to see them. Zero (left out of the JSON) where the
	// message has no position yet: in the Kafka envelope and in the stored
	// history, whose positions follow from the element's place.
	Pos int64 `json:"pos,omitempty"`
	// Deleted marks a tombstone: a message a moderator deleted, of which a
	// room's stored history keeps the id and the position only, so the
	// positions around it stay where they were. Readers of the history
	// (comets, GET /logic/history) never hand a tombstone to a viewer.
	Deleted bool `json:"deleted,omitempty"`
}

// Priority is a message's lane. High-priority messages (paid, moderator,
// system) are never dropped by a room's overflow or drop policy, never
// thinned, and never wait for the room's window; they keep the room's
// order and positions like any message. On the wire it is a number,
// absent for PriorityNormal.
type Priority uint8

// The lanes a message may travel in.
const (
	PriorityNormal Priority = 0
	PriorityHigh   Priority = 1
)

// High reports whether p is the high lane.
func (p Priority) High() bool { return p == PriorityHigh }

// Check returns an EINVALID error naming field when p is not a known
// lane.
func (p Priority) Check(field string) error {
	if p > PriorityHigh {
		return Errorf(EINVALID, field, "priority %d: must be 0 (normal) or 1 (high)", p)
	}
	return nil
}

// String is for logs and metrics labels.
func (p Priority) String() string {
	switch p {
	case PriorityNormal:
		return "normal"
	case PriorityHigh:
		return "high"
	}
	return "priority(" + strconv.Itoa(int(p)) + ")"
}

// Envelope is the Kafka record value: one message, or one moderation event,
// of one room, or one notice to a user or to everyone. The record key is the
// room id (a note's: UserKey or BroadcastKey), so one partition carries all messages and
// events of a room, or all notices of a user, in order.
type Envelope struct {
	V    int     `json:"v"`
	Room string  `json:"room"`
	Msg  Message `json:"msg"`
	// HoldMs holds Msg back in job until HoldMs after Msg.TS (a room's
	// non-moderator delay, RoomState.DelaySeconds): it gets its position,
	// and reaches viewers and the history, only then, and not at all when
	// a del event of its id comes first. 0: delivered at once.
	HoldMs int64 `json:"holdMs,omitempty"`
	// Event is set instead of Msg on an event (version 2).
	Event *Event `json:"event,omitempty"`
	// Notice is set instead of Msg on a notice (version 3), with User (its
	// user) or All (a broadcast to every viewer); Room is empty.
	Notice *Notice `json:"notice,omitempty"`
	// Canary is set instead of Msg on a delivery probe (version 4); Room
	// is empty.
	Canary *Canary `json:"canary,omitempty"`
	User   string  `json:"user,omitempty"`
	All    bool    `json:"all,omitempty"`
	// MsgJSON is Msg as the record carries it, set by UnmarshalEnvelope
	// for a record laid out as MarshalEnvelope writes it when those bytes
	// can stand for Msg in the room's history and in
	// pushes (an object whose first field is the id, without a position or
	// a tombstone mark): job stores and pushes them instead of encoding Msg
	// again.
	MsgJSON []byte `json:"-"`
}

// MarshalEnvelope encodes one message of room as a Kafka record value.
func MarshalEnvelope(room string, m Message) ([]byte, error) {
	return marshalEnvelope(room, m, 0)
}

// MarshalHeld encodes one message of room that job holds for holdMs
// after its TS (Envelope.HoldMs) as a Kafka record value.
func MarshalHeld(room string, m Message, holdMs int64) ([]byte, error) {
	return marshalEnvelope(room, m, holdMs)
}

// MarshalEvent encodes a moderation event as a Kafka record value.
func MarshalEvent(ev Event) ([]byte, error) {
	if err := ev.Check(); err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		V     int    `json:"v"`
		Room  string `json:"room"`
		Event Event  `json:"event"`
	}{EventEnvelopeVersion, ev.Room, ev})
}

// UnmarshalEnvelope decodes and checks a Kafka record value. A record that
// cannot be decoded, comes from a newer writer, or carries an invalid room,
// an empty message id, an invalid event or an invalid notice is an EINVALID
// error: it can never be delivered and the consumer counts and skips it.
func UnmarshalEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return e, Errorf(EINVALID, "envelope", "decode envelope: %v", err)
	}
	if e.HoldMs < 0 {
		return e, Errorf(EINVALID, "envelope.holdMs", "negative hold %d", e.HoldMs)
	}
	if raw := msgBytes(b, e.Room, e.HoldMs); raw != nil && e.Msg.Pos == 0 && !e.Msg.Deleted && idFirst(raw, e.Msg.ID) {
		e.MsgJSON = bytes.Clone(raw) // b may be reused by the caller
	}
	if e.V < 1 || e.V > CanaryEnvelopeVersion {
		return e, Errorf(EINVALID, "envelope.v", "unsupported envelope version %d", e.V)
	}
	if e.Canary != nil {
		return e, e.Canary.Check()
	}
	if e.Notice != nil {
		return e, e.checkNotice()
	}
	if err := CheckID("envelope.room", e.Room); err != nil {
		return e, err
	}
	if e.Event != nil {
		if e.Event.Room != e.Room {
			return e, Errorf(EINVALID, "envelope.event.room", "event of room %q in an envelope of room %q", e.Event.Room, e.Room)
		}
		return e, e.Event.Check()
	}
	if e.Msg.ID == "" {
		return e, Errorf(EINVALID, "envelope.msg.id", "message id is empty")
	}
	return e, nil
}

// Batch is what job pushes to a comet: messages of one room, oldest first.
// Its JSON form is also the "msgs" frame viewers receive: a comet decodes
// the pushed batch, drops the ids it already showed in the room, and encodes
// what is left once for all of the room's viewers.
type Batch struct {
	Op   string `json:"op"` // always "msgs"
	Room string `json:"room"`
	// Epoch names the room's timeline the positions of Msgs belong to. It
	// changes only when the room's history was lost (Redis emptied, the
	// history expired, a failover lost writes), and positions start at 1
	// again: a client that knows the epoch can tell a resume from a fresh
	// start.
	Epoch string `json:"epoch,omitempty"`
	// Replay is set on frames that replay stored messages (history on join,
	// recovery after a resume, a slow viewer's catch-up) rather than carry
	// live ones.
	Replay bool      `json:"replay,omitempty"`
	Msgs   []Message `json:"msgs"`
	// Skipped is set on frames thinned for a viewer with a density cap:
	// how many normal messages of the room since the tier's previous frame
	// (on a replay frame: within its positions) were left out for it.
	// Never set in a push from job.
	Skipped int64 `json:"skipped,omitempty"`
	// Through is set on a frame thinned for a viewer with a density cap
	// whose skipped count takes in positions after its last message: the
	// last position the frame accounts for. A client resumes after it
	// (since), so the messages left out up to it are not counted again.
	Through int64 `json:"through,omitempty"`
	// Dels is set in a push from job only: how many message ids were
	// deleted in the epoch so far, so a comet that missed a del event
	// reads the rest of the room's deletion log. Comets leave it out of
	// viewers' frames.
	Dels int64 `json:"dels,omitempty"`
	// Sv is set in a push from job only: the version of the room's
	// settings (RoomState.Ver, which pins share) when job positioned the
	// batch, so a comet that missed a state or pin event (its push failed,
	// the comet was away) reads the settings again. Comets leave it out of
	// viewers' frames.
	Sv int64 `json:"sv,omitempty"`
}

// OpMsgs is the op of a frame carrying messages.
const OpMsgs = "msgs"

// msgBytes returns the bytes of the message of b, a record value, when b
// is laid out as MarshalEnvelope writes one, {"v":1,"room":"<room>",
// "msg":{...}}, or MarshalHeld one with hold, {...,"msg":{...},"holdMs":N};
// otherwise nil.
func msgBytes(b []byte, room string, hold int64) []byte {
	const head, mid = `{"v":1,"room":"`, `","msg":{`
	tail := "}"
	if hold > 0 {
		tail = `,"holdMs":` + strconv.FormatInt(hold, 10) + "}"
	}
	n := len(head) + len(room)
	if len(b) < n+len(mid)+len(tail)+1 || string(b[:len(head)]) != head || string(b[len(head):n]) != room ||
		string(b[n:n+len(mid)]) != mid || string(b[len(b)-len(tail):]) != tail || b[len(b)-len(tail)-1] != '}' {
		return nil
	}
	return b[n+len(mid)-1 : len(b)-len(tail)]
}

// idFirst reports whether raw, a JSON object, starts with the field "id"
// holding id as it is, unescaped.
func idFirst(raw []byte, id string) bool {
	const p = `{"id":"`
	n := len(p) + len(id)
	return len(raw) > n && string(raw[:len(p)]) == p && string(raw[len(p):n]) == id && raw[n] == '"'
}

// AppendBatchJSON appends to dst the JSON of b with its messages given
// encoded: msgs[i] is the JSON of a message without its position, as
// Envelope.MsgJSON and the room's history hold it, and pos[i] its position
// (b.Msgs is not read). The bytes are those json.Marshal gives for b with
// those messages in Msgs, so a message encoded once is stored and pushed
// as it is.
func AppendBatchJSON(dst []byte, b Batch, msgs [][]byte, pos []int64) []byte {
	n := 96 + len(b.Room) + len(b.Epoch)
	for _, m := range msgs {
		n += len(m) + 28 // ,"pos":<up to 19 digits>, and a comma
	}
	dst = slices.Grow(dst, n)
	dst = append(dst, `{"op":`...)
	dst = appendJSONString(dst, b.Op)
	dst = append(dst, `,"room":`...)
	dst = appendJSONString(dst, b.Room)
	if b.Epoch != "" {
		dst = append(dst, `,"epoch":`...)
		dst = appendJSONString(dst, b.Epoch)
	}
	if b.Replay {
		dst = append(dst, `,"replay":true`...)
	}
	dst = append(dst, `,"msgs":[`...)
	for i, m := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if pos[i] == 0 {
			dst = append(dst, m...)
			continue
		}
		dst = append(dst, m[:len(m)-1]...) // without its closing brace
		dst = append(dst, `,"pos":`...)
		dst = strconv.AppendInt(dst, pos[i], 10)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if b.Skipped != 0 {
		dst = append(dst, `,"skipped":`...)
		dst = strconv.AppendInt(dst, b.Skipped, 10)
	}
	if b.Dels != 0 {
		dst = append(dst, `,"dels":`...)
		dst = strconv.AppendInt(dst, b.Dels, 10)
	}
	if b.Sv != 0 {
		dst = append(dst, `,"sv":`...)
		dst = strconv.AppendInt(dst, b.Sv, 10)
	}
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string, escaped as json.Marshal
// escapes it.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			js, _ := json.Marshal(s)
			return append(dst, js...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// NewBatch returns the batch frame for msgs of room.
func NewBatch(room string, msgs []Message) Batch {
	return Batch{Op: OpMsgs, Room: room, Msgs: msgs}
}

// String is for logs and test failures.
func (b Batch) String() string {
	return fmt.Sprintf("batch{room=%s n=%d}", b.Room, len(b.Msgs))
}
