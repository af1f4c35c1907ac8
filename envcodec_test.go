package danmaku

import (
	"bytes"
	"encoding/json"
	"testing"
)

// appendEnvelope writes what encoding/json writes for the same envelope,
// whenever it takes the envelope.
func FuzzAppendEnvelope(f *testing.F) {
	f.Add("room-1", "m-1", "ann", "hello", int64(42), int64(1764150000000), uint8(0), false, int64(0), int64(0), false)
	f.Add("r", "1", "名前", "弾幕 <b>&", int64(-1), int64(0), uint8(1), true, int64(7), int64(5000), true)
	f.Add("r", "x", "a\u2028b", "\"q\"\\", int64(0), int64(0), uint8(2), false, int64(0), int64(-3), false)
	f.Add("r", "x", "\xff", "\x7f\x01", int64(0), int64(0), uint8(0), false, int64(0), int64(0), false)
	f.Fuzz(func(t *testing.T, room, id, name, content string, uid, ts int64, prio uint8, mod bool, pos, hold int64, del bool) {
		m := Message{ID: id, UID: uid, Name: name, Content: content, TS: ts, Priority: Priority(prio), Mod: mod, Pos: pos, Deleted: del}
		want, err := json.Marshal(Envelope{V: EnvelopeVersion, Room: room, Msg: m, HoldMs: hold})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendEnvelope(nil, room, m, hold)
		if ok && !bytes.Equal(got, want) {
			t.Fatalf("appendEnvelope %s\nencoding/json  %s", got, want)
		}
		if b, _ := marshalEnvelope(room, m, hold); !bytes.Equal(b, want) {
			t.Fatalf("marshalEnvelope %s\nencoding/json   %s", b, want)
		}
	})
}

func BenchmarkMarshalEnvelope(b *testing.B) {
	m := Message{ID: "0197b2c4d5e6f708", UID: 4242, Name: "u4242", Content: "a comment of some length", TS: 1764150000000}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if _, err := MarshalEnvelope("room-17", m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(Envelope{V: EnvelopeVersion, Room: "room-17", Msg: m}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The send answer and the ack frame: the bytes of encoding/json whenever
// AppendJSON takes them.
func FuzzAppendAnswers(f *testing.F) {
	f.Add("0197b2c4d5e6f708", "c-1", "x", int64(7), uint8(3), true)
	f.Add("a<b", "", "名", int64(-1), uint8(0), false)
	f.Add("\u2028", "\xff", "\"", int64(0), uint8(1), true)
	f.Fuzz(func(t *testing.T, a, b, c string, ref int64, n uint8, held bool) {
		var ids []string
		if n > 0 {
			ids = []string{a, b, c}[:n%4]
		}
		r := SendResponse{MsgIDs: ids}
		if held {
			r.Held = ids[:min(len(ids), 1)]
		}
		for _, v := range []interface {
			AppendJSON([]byte) ([]byte, bool)
		}{r, AckFrame{Op: OpAck, Ref: ref, IDs: ids}, AckFrame{Op: a, IDs: ids}} {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := v.AppendJSON(nil); ok && !bytes.Equal(got, want) {
				t.Fatalf("AppendJSON %s\nencoding/json %s", got, want)
			}
		}
	})
}
