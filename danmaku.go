// Package danmaku holds the domain types shared by every role of the
// broadcast service: the message a viewer sees, the envelope that carries it
// through Kafka, the batch pushed to comets, id validation and the error type
// with codes. It imports nothing of this module; the adapters (route, logic,
// job, comet) import it.
package danmaku

import (
	"encoding/json"
	"fmt"
)

// EnvelopeVersion is the version written into every Envelope. Readers accept
// any version up to this one and reject newer ones, so a rolling upgrade
// deploys readers (job) before writers (logic).
const EnvelopeVersion = 1

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
	// Pos is the message's position in its room's timeline: 1 for the first
	// message of an epoch, one more for each message after it, in the order
	// viewers are meant to see them. Zero (left out of the JSON) where the
	// message has no position yet: in the Kafka envelope and in the stored
	// history, whose positions follow from the element's place.
	Pos int64 `json:"pos,omitempty"`
}

// Envelope is the Kafka record value: one message of one room. The record key
// is the room id, so one partition carries all messages of a room in order.
type Envelope struct {
	V    int     `json:"v"`
	Room string  `json:"room"`
	Msg  Message `json:"msg"`
}

// MarshalEnvelope encodes one message of room as a Kafka record value.
func MarshalEnvelope(room string, m Message) ([]byte, error) {
	return json.Marshal(Envelope{V: EnvelopeVersion, Room: room, Msg: m})
}

// UnmarshalEnvelope decodes and checks a Kafka record value. A record that
// cannot be decoded, comes from a newer writer, or carries an invalid room or
// empty message id is an EINVALID error: it can never be delivered and the
// consumer counts and skips it.
func UnmarshalEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return e, Errorf(EINVALID, "envelope", "decode envelope: %v", err)
	}
	if e.V < 1 || e.V > EnvelopeVersion {
		return e, Errorf(EINVALID, "envelope.v", "unsupported envelope version %d", e.V)
	}
	if err := CheckID("envelope.room", e.Room); err != nil {
		return e, err
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
}

// OpMsgs is the op of a frame carrying messages.
const OpMsgs = "msgs"

// NewBatch returns the batch frame for msgs of room.
func NewBatch(room string, msgs []Message) Batch {
	return Batch{Op: OpMsgs, Room: room, Msgs: msgs}
}

// String is for logs and test failures.
func (b Batch) String() string {
	return fmt.Sprintf("batch{room=%s n=%d}", b.Room, len(b.Msgs))
}
