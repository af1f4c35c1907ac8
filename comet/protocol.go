package comet

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/sendpath"
)

// Ops of the WebSocket protocol (docs/protocol.md; declared in the root
// package with the frames).
const (
	opJoin         = danmaku.OpJoin
	opSub          = danmaku.OpSub
	opUnsub        = danmaku.OpUnsub
	opPing         = danmaku.OpPing
	opPong         = danmaku.OpPong
	opWelcome      = danmaku.OpWelcome
	opUnsubscribed = danmaku.OpUnsubscribed
	opError        = danmaku.OpError
	opDensity      = danmaku.OpDensity
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
	codeNotSubbed   = danmaku.CodeNotSubscribed
)

// Close codes beyond RFC 6455's.
const (
	// CloseSlowConsumer closes a viewer whose send queue overflowed.
	CloseSlowConsumer = 4008
	// CloseUnavailable closes a viewer that could not be registered.
	CloseUnavailable = websocket.CloseTryAgainLater
)

// The frames of the protocol, as the root package declares them.
type (
	clientFrame       = danmaku.ClientFrame
	welcomeFrame      = danmaku.Welcome
	errorFrame        = danmaku.ErrorFrame
	unsubscribedFrame = danmaku.Unsubscribed
	delFrame          = danmaku.DelFrame
	onlineFrame       = danmaku.OnlineFrame
	densityFrame      = danmaku.DensityFrame
)

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
	if f, ok := sendpath.ScanSendFrame(b); ok {
		return f, nil // the send path checks the rest, as below
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
	case opDensity:
		return f, checkDensityFrame(f)
	case danmaku.OpSend:
		// The send path checks the rest, as it does a request's body.
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

// checkDensityFrame checks a density op: a cap (max) in range, and a valid
// room when it names one.
func checkDensityFrame(f clientFrame) error {
	if f.Room != "" {
		if err := danmaku.CheckID("room", f.Room); err != nil {
			return &frameError{codeBadRoom, badRoomText(err)}
		}
	}
	if f.Max == nil || *f.Max < 0 || *f.Max > maxDensity {
		return &frameError{codeBadJSON, "max must be a number of messages a second between 0 (every message) and " + strconv.Itoa(maxDensity)}
	}
	return nil
}

// joinReqOf is the join or sub f asks for.
func joinReqOf(f clientFrame) joinReq {
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
var pongFrame = prepare(danmaku.ServerFrame{Op: opPong})

var pongFrameLen = len(`{"op":"pong"}`)
