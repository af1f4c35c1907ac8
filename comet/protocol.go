package comet

import (
	"bytes"
	"encoding/json"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// Ops of the WebSocket protocol (docs/protocol.md).
const (
	opJoin         = "join"
	opSub          = "sub"
	opUnsub        = "unsub"
	opPing         = "ping"
	opPong         = "pong"
	opWelcome      = "welcome"
	opUnsubscribed = "unsubscribed"
	opError        = "error"
)

// Error codes carried by error frames (declared with every other code in
// the root package).
const (
	codeBadJSON     = danmaku.CodeBadJSON
	codeBadFrame    = danmaku.CodeBadFrame
	codeUnknownOp   = danmaku.CodeUnknownOp
	codeBadRoom     = danmaku.CodeBadRoom
	codeUnavailable = danmaku.EUNAVAILABLE // the registry (Redis) did not answer
	codeTooMany     = danmaku.CodeTooManyRooms
)

// Close codes beyond RFC 6455's.
const (
	// CloseSlowConsumer closes a viewer whose send queue overflowed.
	CloseSlowConsumer = 4008
	// CloseUnavailable closes a viewer that could not be registered.
	CloseUnavailable = websocket.CloseTryAgainLater
)

// clientFrame is a parsed client frame.
type clientFrame struct {
	Op   string `json:"op"`
	Room string `json:"room,omitempty"`
	// Since and Epoch ask a join to resume: every message of the room's
	// timeline Epoch after position Since.
	Since *int64 `json:"since,omitempty"`
	Epoch string `json:"epoch,omitempty"`
}

// maxEpochLen bounds the epoch a client may send back; epochs are short
// random ids.
const maxEpochLen = 64

// frameError is what parseFrame reports: the error frame to send.
type frameError struct {
	Code    string
	Message string
}

func (e *frameError) Error() string { return e.Code + ": " + e.Message }

// parseFrame decodes and checks one text frame from a viewer. It never
// panics; every failure is a *frameError naming the code to answer with.
func parseFrame(b []byte) (clientFrame, error) {
	var f clientFrame
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return f, &frameError{codeBadJSON, "frame must be a JSON object"}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return clientFrame{}, &frameError{codeBadJSON, jsonProblem(err)}
	}
	switch f.Op {
	case opPing:
		return f, nil
	case opUnsub:
		if err := danmaku.CheckID("room", f.Room); err != nil {
			return clientFrame{}, &frameError{codeBadRoom, badRoomText(err)}
		}
		return f, nil
	case opJoin, opSub:
		if err := danmaku.CheckID("room", f.Room); err != nil {
			return clientFrame{}, &frameError{codeBadRoom, badRoomText(err)}
		}
		if f.Since != nil && *f.Since < 0 {
			return clientFrame{}, &frameError{codeBadJSON, "since must not be negative"}
		}
		if len(f.Epoch) > maxEpochLen {
			return clientFrame{}, &frameError{codeBadJSON, "epoch is too long"}
		}
		return f, nil
	case "":
		return clientFrame{}, &frameError{codeUnknownOp, "op is missing"}
	default:
		op := f.Op
		if len(op) > 32 {
			op = op[:32]
		}
		return clientFrame{}, &frameError{codeUnknownOp, "unknown op " + quote(op)}
	}
}

// joinReq is the join or sub f asks for.
func (f clientFrame) joinReq() joinReq {
	req := joinReq{room: f.Room, epoch: f.Epoch}
	if f.Since != nil {
		req.resume, req.since = true, *f.Since
	}
	return req
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// welcomeFrame is sent after every successful join.
type welcomeFrame struct {
	Op          string `json:"op"`
	ConnID      string `json:"connId"`
	Room        string `json:"room"`
	Online      int64  `json:"online"`
	HeartbeatMs int64  `json:"heartbeatMs"`
	// Epoch and Pos are the room's timeline head as this comet knows it
	// when the viewer joined: the last position it was given (in the
	// history frame that follows, or before). "" and 0: no timeline yet.
	Epoch string `json:"epoch"`
	Pos   int64  `json:"pos"`
	// Recovered answers a join with since: true when every message after
	// since follows, false when the comet sends the recent history instead
	// (another epoch, or since older than the kept history).
	Recovered *bool `json:"recovered,omitempty"`
}

// errorFrame reports a client frame that could not be served; the
// connection stays open unless a close follows. Room names the room the
// refused join, sub or event was about (absent when there is none, or the
// room id itself was invalid).
type errorFrame struct {
	Op      string `json:"op"`
	Room    string `json:"room,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// unsubscribedFrame confirms an unsub: no frame of the room follows it.
type unsubscribedFrame struct {
	Op   string `json:"op"`
	Room string `json:"room"`
}

// prepare encodes v once as a text frame.
func prepare(v any) *websocket.PreparedMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("comet: encode frame: " + err.Error()) // only fixed types reach here
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b)
	if err != nil {
		panic("comet: prepare frame: " + err.Error())
	}
	return pm
}

// pongFrame is shared by every connection: its wire form is computed once
// per compression mode.
var pongFrame = prepare(struct {
	Op string `json:"op"`
}{opPong})

var pongFrameLen = len(`{"op":"pong"}`)
