package danmaku

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// Push is the body of job's POST /push to a comet, one of four shapes
// told apart by their op: a room's messages (msgs: Batch), a moderation
// event of a room (del, ban, state: Event), notices (user, all: NoticePush) or
// delivery canaries (canary: CanaryPush).
// Exactly one of the fields is set. Job writes each shape with its own
// encoder (AppendBatchJSON, json.Marshal of the Event or NoticePush), op
// first; comets decode every push with UnmarshalPush.
type Push struct {
	Batch    *Batch
	Event    *Event
	Notices  *NoticePush
	Canaries *CanaryPush
}

// Op is the op of the body p holds ("" when it holds none).
func (p Push) Op() string {
	switch {
	case p.Batch != nil:
		return p.Batch.Op
	case p.Event != nil:
		return p.Event.Op
	case p.Notices != nil:
		return p.Notices.Op
	case p.Canaries != nil:
		return p.Canaries.Op
	}
	return ""
}

// MarshalJSON encodes the body p holds.
func (p Push) MarshalJSON() ([]byte, error) {
	switch {
	case p.Batch != nil:
		return json.Marshal(p.Batch)
	case p.Event != nil:
		return json.Marshal(p.Event)
	case p.Notices != nil:
		return json.Marshal(p.Notices)
	case p.Canaries != nil:
		return json.Marshal(p.Canaries)
	}
	return nil, errors.New("encode push: empty")
}

// UnmarshalJSON decodes a push body without checking it (UnmarshalPush
// does both).
func (p *Push) UnmarshalJSON(b []byte) error {
	*p = Push{}
	var v any
	switch op := opOf(b); op {
	case OpMsgs:
		p.Batch = new(Batch)
		v = p.Batch
	case OpDel, OpBan, OpState, OpShadow, OpPin, OpUnpin:
		p.Event = new(Event)
		v = p.Event
	case OpUser, OpAll:
		p.Notices = new(NoticePush)
		v = p.Notices
	case OpCanary:
		p.Canaries = new(CanaryPush)
		v = p.Canaries
	default:
		var probe struct{ Op string }
		if err := json.Unmarshal(b, &probe); err != nil {
			return Errorf(EINVALID, "body", "decode push: %v", err)
		}
		return Errorf(EINVALID, "op", "must be %q, %q, %q, %q, %q, %q, %q, %q, %q or %q", OpMsgs, OpDel, OpBan, OpState, OpShadow, OpPin, OpUnpin, OpUser, OpAll, OpCanary)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return Errorf(EINVALID, "body", "decode %s push: %v", p.Op(), err)
	}
	if dec.More() {
		return Errorf(EINVALID, "body", "trailing data after the %s push", p.Op())
	}
	return nil
}

// UnmarshalPush decodes and checks a push body. A body that is no push
// of a known op, a batch of an invalid room or with a message without id,
// an invalid event, notices to an invalid user or without id are EINVALID
// errors naming the field.
func UnmarshalPush(body []byte) (Push, error) {
	var p Push
	if err := p.UnmarshalJSON(body); err != nil {
		return p, err
	}
	return p, p.check()
}

func (p *Push) check() error {
	switch {
	case p.Event != nil:
		return p.Event.Check()
	case p.Notices != nil:
		return p.Notices.check()
	case p.Canaries != nil:
		return p.Canaries.check()
	}
	if err := CheckID("room", p.Batch.Room); err != nil {
		return err
	}
	for i, m := range p.Batch.Msgs {
		if m.ID == "" {
			return Errorf(EINVALID, "msgs["+strconv.Itoa(i)+"].id", "must not be empty")
		}
	}
	return nil
}

// check reports whether every notice of p has an id and every user is a
// valid id.
func (p *NoticePush) check() error {
	if p.Op == OpAll {
		return checkNoticeIDs("msgs", p.Msgs)
	}
	for i, un := range p.Users {
		field := "users[" + strconv.Itoa(i) + "]"
		if err := CheckID(field+".user", un.User); err != nil {
			return err
		}
		if err := checkNoticeIDs(field+".msgs", un.Msgs); err != nil {
			return err
		}
	}
	return nil
}

func checkNoticeIDs(field string, msgs []Notice) error {
	for j, m := range msgs {
		if m.ID == "" {
			return Errorf(EINVALID, field+"["+strconv.Itoa(j)+"].id", "must not be empty")
		}
	}
	return nil
}

// opOf returns the op of a push body or frame: cheaply when "op" is its
// first key (job and the comets write it first), else by decoding it.
func opOf(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	if k, err := dec.Token(); err == nil && k == "op" {
		v, _ := dec.Token()
		op, _ := v.(string)
		return op
	}
	var p struct {
		Op string `json:"op"`
	}
	json.Unmarshal(body, &p)
	return p.Op
}
