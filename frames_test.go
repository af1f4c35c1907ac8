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
// field left over and encoded again, it says the same; frames of the ops
// job also pushes to comets do so through danmaku.Push too. Examples with
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
		danmaku.OpMsgs:         {func() any { return new(danmaku.Batch) }},
		danmaku.OpDel:          {func() any { return new(danmaku.DelFrame) }, func() any { return new(danmaku.Event) }},
		danmaku.OpBan:          {func() any { return new(danmaku.Event) }},
		danmaku.OpUser:         {func() any { return new(danmaku.NoticeFrame) }, func() any { return new(danmaku.NoticePush) }},
		danmaku.OpAll:          {func() any { return new(danmaku.NoticeFrame) }},
	}
	// The ops of frames that are also push bodies (danmaku.Push).
	pushOps := map[string]bool{danmaku.OpMsgs: true, danmaku.OpDel: true, danmaku.OpBan: true, danmaku.OpUser: true, danmaku.OpAll: true}
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
		if pushOps[probe.Op] {
			var p danmaku.Push
			var out []byte
			err := json.Unmarshal(ex, &p)
			if err == nil {
				out, err = json.Marshal(p)
			}
			if err != nil || !sameJSON(t, out, ex) {
				t.Errorf("%s does not round-trip through danmaku.Push: %s", ex, out)
			}
		}
		seen[probe.Op]++
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
