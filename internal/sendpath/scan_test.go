package sendpath

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/danmaku/danmaku"
)

// What ScanSendFrame takes, encoding/json decodes to the same frame (the
// comet's parseFrame decodes the others that way).
func FuzzScanSendFrame(f *testing.F) {
	for _, seed := range []string{
		`{"op":"send","room":"r1","msgs":[{"content":"hi","msgId":"m-1"}],"ref":7}`,
		` {"ref":-0,"msgs":[],"op":"send","priority":1,"room":"弾幕"} `,
		`{"op":"send","room":"r","msgs":[{"content":"a","extra":1}]}`,
		`{"op":"send","Room":"r"}`,
		`{"op":"send","room":"r","room":"s"}`,
		`{"op":"send","ref":1.5}`,
		`{"op":"send","priority":-0}`,
		`{"op":"join","room":"r"}`,
		`{"op":"send","room":"\xff"}`,
		`{"op":"send"}{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ScanSendFrame(b)
		if !ok {
			return
		}
		var want danmaku.ClientFrame
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("ScanSendFrame took %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) || got.Op != danmaku.OpSend {
			t.Fatalf("%q: ScanSendFrame %+v, encoding/json %+v", b, got, want)
		}
	})
}

func BenchmarkScanSendFrame(b *testing.B) {
	frame := []byte(`{"op":"send","room":"room-17","msgs":[{"content":"a comment of some length","msgId":"c-4242-1"}],"ref":42}`)
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if _, ok := ScanSendFrame(frame); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			var f danmaku.ClientFrame
			if err := json.Unmarshal(bytes.TrimSpace(frame), &f); err != nil {
				b.Fatal(err)
			}
		}
	})
}
