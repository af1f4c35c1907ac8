package logic

import (
	"reflect"
	"testing"

	"github.com/danmaku/danmaku/internal/sendpath"
)

// What sendpath.ScanRequest takes, encoding/json decodes to the same request with
// every key as documented; what it leaves, decodeSend still decodes (or
// refuses) the full way.
func FuzzScanSend(f *testing.F) {
	for _, seed := range []string{
		`{"roomId":"r1","userId":42,"userName":"ann","messages":[{"content":"hi","msgId":"m-1"}]}`,
		` { "messages" : [ { "msgId" : "a" , "content" : "弾幕 ok" } , {"content":""} ] , "roomId" : "r" , "priority" : 1 } `,
		`{"roomId":"r","userId":-0,"messages":[],"priority":0}`,
		`{"roomId":"r","userId":1,"priority":-0}`,
		`{"roomId":"r","userId":01}`,
		`{"roomId":"r","userId":1.0}`,
		`{"roomId":"r","userId":9223372036854775808}`,
		`{"roomId":"r","roomId":"s"}`,
		`{"roomid":"r"}`,
		`{"roomId":"a\"b"}`,
		`{"roomId":"\xff"}`,
		`{"userName":"\xc3"}`,
		`{"messages":[{"content":"a","content":"b"}]}`,
		`{"messages":[{}]}`,
		`{"messages":null}`,
		`{}`,
		`{} x`,
		`{"priority":2}`,
		`{"roomId":"r",}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := sendpath.ScanRequest(b)
		if !ok {
			return
		}
		want, ok := decodeSendFast(b)
		if !ok {
			t.Fatalf("ScanRequest took %q, encoding/json refuses it", b)
		}
		if err := checkSendKeys(b); err != nil {
			t.Fatalf("ScanRequest took %q, its keys are refused: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: ScanRequest %+v, encoding/json %+v", b, got, want)
		}
	})
}

func BenchmarkDecodeSendBody(b *testing.B) {
	body := []byte(`{"roomId":"room-17","userId":4242,"userName":"u4242","messages":[{"content":"a comment of some length","msgId":"c-4242-1"}]}`)
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if _, ok := sendpath.ScanRequest(body); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			if _, ok := decodeSendFast(body); !ok || checkSendKeys(body) != nil {
				b.Fatal("refused")
			}
		}
	})
}
