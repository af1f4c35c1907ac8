package danmaku_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/danmaku/danmaku"
)

// TestEncodeOnce checks that the bytes of a message kept from its envelope
// (Envelope.MsgJSON) and a push body built from them (AppendBatchJSON) are
// exactly what json.Marshal gives: a viewer cannot tell a message encoded
// once from one encoded at every step.
func TestEncodeOnce(t *testing.T) {
	msgs := []danmaku.Message{
		{ID: "m1", UID: 42, Name: "ann", Content: "hello", TS: 1730620801123},
		{ID: "m-2.x_", UID: 0, Name: "", Content: "", TS: 0},
		{ID: "m3", UID: -7, Name: "\u202eevil <b>&amp;</b>", Content: "quote \" backslash \\ tab \t nl \n \u2028 😀 é", TS: 1},
		{ID: "m4", UID: 9, Name: "mod", Content: "pinned", TS: 2, Priority: danmaku.PriorityHigh},
	}
	encs := make([][]byte, len(msgs))
	for i, m := range msgs {
		rec, err := danmaku.MarshalEnvelope("room_1", m)
		if err != nil {
			t.Fatal(err)
		}
		env, err := danmaku.UnmarshalEnvelope(rec)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(m)
		if !bytes.Equal(env.MsgJSON, want) || env.Msg != m {
			t.Fatalf("message %d: kept %s (decoded %+v), want %s", i, env.MsgJSON, env.Msg, want)
		}
		encs[i] = env.MsgJSON
	}
	for _, b := range []danmaku.Batch{
		danmaku.NewBatch("room_1", nil),
		{Op: danmaku.OpMsgs, Room: "video.123", Epoch: "0f3a9c", Dels: 5},
		{Op: danmaku.OpMsgs, Room: "video.123", Epoch: "0f3a9c", Skipped: 1234},
		{Op: danmaku.OpMsgs, Room: "r", Epoch: "e", Replay: true},
	} {
		for _, pos := range [][]int64{{1, 2, 3, 4}, {0, 0, 0, 0}, {9007199254740993, 7, 1 << 40, 8}} {
			b.Msgs = make([]danmaku.Message, len(msgs))
			for i, m := range msgs {
				m.Pos = pos[i]
				b.Msgs[i] = m
			}
			want, _ := json.Marshal(b)
			if got := danmaku.AppendBatchJSON(nil, b, encs, pos); !bytes.Equal(got, want) {
				t.Errorf("batch %+v:\n got %s\nwant %s", b, got, want)
			}
		}
	}
}

// TestEnvelopeMsgJSONOnlyWhenReusable: bytes that could not stand for the
// message in the history (id not first, a position, a tombstone mark, an
// escaped id) are not kept; the message is still decoded.
func TestEnvelopeMsgJSONOnlyWhenReusable(t *testing.T) {
	for name, rec := range map[string]string{
		"uid first":  `{"v":1,"room":"r","msg":{"uid":1,"id":"m1","content":"c"}}`,
		"with pos":   `{"v":1,"room":"r","msg":{"id":"m1","content":"c","pos":3}}`,
		"tombstone":  `{"v":1,"room":"r","msg":{"id":"m1","deleted":true}}`,
		"escaped id": `{"v":1,"room":"r","msg":{"id":"m\u0031","content":"c"}}`,
		"room first": `{"room":"r","v":1,"msg":{"id":"m1","content":"c"}}`,
		"spaced":     `{"v":1,"room":"r","msg": {"id":"m1","content":"c"}}`,
	} {
		env, err := danmaku.UnmarshalEnvelope([]byte(rec))
		if err != nil || env.Msg.ID != "m1" {
			t.Fatalf("%s: %+v %v", name, env, err)
		}
		if env.MsgJSON != nil {
			t.Errorf("%s: kept %s", name, env.MsgJSON)
		}
	}
}

// BenchmarkEncodeOnce prices job's encoding work for a batch of 50
// messages from their Kafka records to the push body: "each-step" decodes
// each envelope and encodes each message for the history and again in the
// push body; "once" keeps the envelope's bytes for both.
func BenchmarkEncodeOnce(b *testing.B) {
	recs := make([][]byte, 50)
	for i := range recs {
		m := danmaku.Message{ID: "0190abc-" + string(rune('a'+i%26)) + "x", UID: int64(1000 + i), Name: "viewer name",
			Content: "a danmaku comment of an ordinary length 弹幕", TS: 1730620801123}
		recs[i], _ = danmaku.MarshalEnvelope("video_123", m)
	}
	b.Run("each-step", func(b *testing.B) {
		for range b.N {
			batch := danmaku.NewBatch("video_123", make([]danmaku.Message, 0, len(recs)))
			for i, rec := range recs {
				var e danmaku.Envelope
				if err := json.Unmarshal(rec, &e); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(e.Msg); err != nil { // the history entry
					b.Fatal(err)
				}
				e.Msg.Pos = int64(i + 1)
				batch.Msgs = append(batch.Msgs, e.Msg)
			}
			if _, err := json.Marshal(batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/msg")
	})
	b.Run("once", func(b *testing.B) {
		encs := make([][]byte, len(recs))
		pos := make([]int64, len(recs))
		for range b.N {
			for i, rec := range recs {
				e, err := danmaku.UnmarshalEnvelope(rec)
				if err != nil || e.MsgJSON == nil {
					b.Fatal(e, err)
				}
				encs[i], pos[i] = e.MsgJSON, int64(i+1)
			}
			danmaku.AppendBatchJSON(nil, danmaku.NewBatch("video_123", nil), encs, pos)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/msg")
	})
}
