package danmaku_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/danmaku/danmaku"
)

// TestProtocolExamples round-trips every frame example of
// docs/protocol.md through the types of this package: decoded with no
// field left over and encoded again, it says the same; so do they through
// the union types danmaku.ServerFrame (frames to viewers) and danmaku.Push
// (job's push bodies). Examples with
// placeholders that are not JSON ("ts":...) are left out.
func TestProtocolExamples(t *testing.T) {
	doc, err := os.ReadFile("docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	// The types a frame of each op may be: viewer frames and push bodies.
	types := map[string][]func() any{
		danmaku.OpJoin:         {func() any { return new(danmaku.ClientFrame) }},
		danmaku.OpSub:          {func() any { return new(danmaku.ClientFrame) }},
		danmaku.OpUnsub:        {func() any { return new(danmaku.ClientFrame) }},
		danmaku.OpPing:         {func() any { return new(danmaku.ClientFrame) }},
		danmaku.OpPong:         {func() any { return new(danmaku.ClientFrame) }},
		danmaku.OpWelcome:      {func() any { return new(danmaku.Welcome) }},
		danmaku.OpError:        {func() any { return new(danmaku.ErrorFrame) }},
		danmaku.OpUnsubscribed: {func() any { return new(danmaku.Unsubscribed) }},
		danmaku.OpOnline:       {func() any { return new(danmaku.OnlineFrame) }},
		danmaku.OpDensity:      {func() any { return new(danmaku.ClientFrame) }, func() any { return new(danmaku.DensityFrame) }},
		danmaku.OpMsgs:         {func() any { return new(danmaku.Batch) }},
		danmaku.OpDel:          {func() any { return new(danmaku.DelFrame) }, func() any { return new(danmaku.Event) }},
		danmaku.OpBan:          {func() any { return new(danmaku.Event) }},
		danmaku.OpState:        {func() any { return new(danmaku.StateFrame) }, func() any { return new(danmaku.Event) }},
		danmaku.OpShadow:       {func() any { return new(danmaku.Event) }},
		danmaku.OpPin:          {func() any { return new(danmaku.PinFrame) }, func() any { return new(danmaku.Event) }},
		danmaku.OpUnpin:        {func() any { return new(danmaku.PinFrame) }, func() any { return new(danmaku.Event) }},
		danmaku.OpUser:         {func() any { return new(danmaku.NoticeFrame) }, func() any { return new(danmaku.NoticePush) }},
		danmaku.OpAll:          {func() any { return new(danmaku.NoticeFrame) }},
		danmaku.OpStream:       {func() any { return new(danmaku.StreamFrame) }},
		danmaku.OpClose:        {func() any { return new(danmaku.CloseFrame) }},
		danmaku.OpCanary:       {func() any { return new(danmaku.CanaryPush) }},
		danmaku.OpSend:         {func() any { return new(danmaku.ClientFrame) }},
		danmaku.OpAck:          {func() any { return new(danmaku.AckFrame) }},
	}
	// The ops of frames that are also push bodies (danmaku.Push), and of
	// the frames a comet sends viewers (danmaku.ServerFrame; a del or user
	// example may be a push body only).
	pushOps := map[string]bool{danmaku.OpMsgs: true, danmaku.OpDel: true, danmaku.OpBan: true, danmaku.OpUser: true, danmaku.OpAll: true,
		danmaku.OpCanary: true}
	serverOps := map[string]bool{danmaku.OpWelcome: true, danmaku.OpMsgs: true, danmaku.OpDel: true, danmaku.OpUser: true,
		danmaku.OpAll: true, danmaku.OpError: true, danmaku.OpOnline: true, danmaku.OpUnsubscribed: true, danmaku.OpPong: true,
		danmaku.OpDensity: true, danmaku.OpAck: true}
	seen := map[string]int{}
	for _, ex := range regexp.MustCompile(`\{"op":"[a-z]+"[^\n`+"`"+`|]*\}`).FindAll(doc, -1) {
		var probe struct{ Op string }
		if json.Unmarshal(ex, &probe) != nil {
			continue // a placeholder
		}
		makers, ok := types[probe.Op]
		if !ok {
			t.Errorf("no type for the op of %s", ex)
			continue
		}
		if !roundTrips(t, ex, makers) {
			t.Errorf("%s does not round-trip through %T", ex, makers[0]())
		}
		push := pushOps[probe.Op] && through(t, ex, new(danmaku.Push))
		if pushOps[probe.Op] && !push {
			t.Errorf("%s does not round-trip through danmaku.Push", ex)
		}
		if serverOps[probe.Op] && !through(t, ex, new(danmaku.ServerFrame)) && !push {
			t.Errorf("%s does not round-trip through danmaku.ServerFrame", ex)
		}
		seen[probe.Op]++
	}
	// The error body of every HTTP answer that is not 2xx.
	bodies := regexp.MustCompile(`\{"error":\{[^\n`+"`"+`|]*\}\}`).FindAll(doc, -1)
	if len(bodies) == 0 {
		t.Error("docs/protocol.md has no example of the error body")
	}
	for _, ex := range bodies {
		if !roundTrips(t, ex, []func() any{func() any { return new(danmaku.ErrorBody) }}) {
			t.Errorf("%s does not round-trip through danmaku.ErrorBody", ex)
		}
	}
	for op := range types {
		if seen[op] == 0 && op != danmaku.OpBan {
			t.Errorf("docs/protocol.md has no example of op %q that is JSON", op)
		}
	}
	t.Logf("examples per op: %v", seen)
}

// roundTrips reports whether ex decodes strictly into one of makers' types
// and encodes back to the same JSON value.
func roundTrips(t *testing.T, ex []byte, makers []func() any) bool {
	var want any
	if err := json.Unmarshal(ex, &want); err != nil {
		t.Fatal(err)
	}
	for _, mk := range makers {
		v := mk()
		dec := json.NewDecoder(bytes.NewReader(ex))
		dec.DisallowUnknownFields()
		if dec.Decode(v) != nil {
			continue
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(got, want) {
			return true
		}
	}
	return false
}

// through reports whether ex decodes into v (a union type with its own
// decoder) and encodes back to the same JSON value.
func through(t *testing.T, ex []byte, v any) bool {
	if json.Unmarshal(ex, v) != nil {
		return false
	}
	out, err := json.Marshal(v)
	return err == nil && sameJSON(t, out, ex)
}

// A frame of an op this version does not know decodes to its op alone (a
// client skips it); a frame without op is refused.
func TestServerFrameOps(t *testing.T) {
	var f danmaku.ServerFrame
	if err := json.Unmarshal([]byte(`{"room":"r","op":"later","x":1}`), &f); err != nil || f.Op != "later" || f != (danmaku.ServerFrame{Op: "later"}) {
		t.Fatalf("unknown op: %+v, %v", f, err)
	}
	if err := json.Unmarshal([]byte(`{"room":"r"}`), &f); danmaku.ErrorField(err) != "op" {
		t.Fatalf("no op: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"op":"msgs","msgs":{}}`), &f); danmaku.ErrorField(err) != "body" {
		t.Fatalf("bad msgs: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"op":"welcome","room":"r","connId":"c","online":3}`), &f); err != nil || f.Welcome == nil || f.Welcome.Online != 3 {
		t.Fatalf("welcome: %+v, %v", f, err)
	}
}
