package danmaku_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/danmaku/danmaku"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	m := danmaku.Message{ID: "0190abc-1", UID: 42, Name: "小明", Content: "hello 弹幕", TS: 1730620801123}
	b, err := danmaku.MarshalEnvelope("video_123", m)
	if err != nil {
		t.Fatal(err)
	}
	e, err := danmaku.UnmarshalEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	if e.V != danmaku.EnvelopeVersion || e.Room != "video_123" || e.Msg != m {
		t.Fatalf("round trip: %+v", e)
	}
}

func TestEnvelopeRejects(t *testing.T) {
	cases := map[string]struct{ body, field string }{
		"not json":      {`{`, "envelope"},
		"newer version": {`{"v":99,"room":"r","msg":{"id":"x"}}`, "envelope.v"},
		"no version":    {`{"room":"r","msg":{"id":"x"}}`, "envelope.v"},
		"bad room":      {`{"v":1,"room":"a:b","msg":{"id":"x"}}`, "envelope.room"},
		"no id":         {`{"v":1,"room":"r","msg":{}}`, "envelope.msg.id"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := danmaku.UnmarshalEnvelope([]byte(tc.body))
			if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != tc.field {
				t.Fatalf("err = %v, want EINVALID on %s", err, tc.field)
			}
		})
	}
}

func TestBatchIsTheWireFrame(t *testing.T) {
	b, _ := json.Marshal(danmaku.NewBatch("video_123", []danmaku.Message{{ID: "1", UID: 123, Name: "n", Content: "c", TS: 5}}))
	want := `{"op":"msgs","room":"video_123","msgs":[{"id":"1","uid":123,"name":"n","content":"c","ts":5}]}`
	if string(b) != want {
		t.Fatalf("frame\n got %s\nwant %s", b, want)
	}
}

func TestCheckID(t *testing.T) {
	for _, ok := range []string{"video_123", "a", "A-Z.0_9", strings.Repeat("x", 64)} {
		if err := danmaku.CheckID("room", ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a:b", "*", "{x}", "a b", "viděo", strings.Repeat("x", 65), "a\nb"} {
		err := danmaku.CheckID("roomId", bad)
		if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != "roomId" {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestEventEnvelopeRoundTrip(t *testing.T) {
	for _, ev := range []danmaku.Event{
		{Op: danmaku.OpDel, Room: "video_123", ID: "ev1", IDs: []string{"a", "b"}},
		{Op: danmaku.OpBan, Room: "video_123", ID: "ev2", User: "42", Until: 1730620801123},
		{Op: danmaku.OpStreamStart, Room: "video_123", ID: "ev3", Stream: "s1", At: 1730620801123},
		{Op: danmaku.OpStreamEnd, Room: "video_123", ID: "ev4", At: 1730620801123},
	} {
		b, err := danmaku.MarshalEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		e, err := danmaku.UnmarshalEnvelope(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if e.V != danmaku.EventEnvelopeVersion || e.Room != ev.Room || e.Event == nil || e.Event.Op != ev.Op ||
			e.Event.ID != ev.ID || strings.Join(e.Event.IDs, ",") != strings.Join(ev.IDs, ",") ||
			e.Event.User != ev.User || e.Event.Until != ev.Until || e.Event.Stream != ev.Stream || e.Event.At != ev.At {
			t.Fatalf("round trip of %+v: %+v %+v", ev, e, e.Event)
		}
	}
}

func TestEventEnvelopeRejects(t *testing.T) {
	cases := map[string]struct{ body, field string }{
		"newer than v4":   {`{"v":5,"room":"r","event":{"op":"del","room":"r","id":"e","ids":["x"]}}`, "envelope.v"},
		"other room":      {`{"v":2,"room":"r","event":{"op":"del","room":"s","id":"e","ids":["x"]}}`, "envelope.event.room"},
		"unknown op":      {`{"v":2,"room":"r","event":{"op":"kick","room":"r","id":"e"}}`, "event.op"},
		"no event id":     {`{"v":2,"room":"r","event":{"op":"del","room":"r","ids":["x"]}}`, "event.id"},
		"no ids":          {`{"v":2,"room":"r","event":{"op":"del","room":"r","id":"e"}}`, "event.ids"},
		"bad id":          {`{"v":2,"room":"r","event":{"op":"del","room":"r","id":"e","ids":["x","a:b"]}}`, "event.ids[1]"},
		"ban no user":     {`{"v":2,"room":"r","event":{"op":"ban","room":"r","id":"e","until":5}}`, "event.user"},
		"ban no until":    {`{"v":2,"room":"r","event":{"op":"ban","room":"r","id":"e","user":"7"}}`, "event.until"},
		"start no stream": {`{"v":2,"room":"r","event":{"op":"stream_start","room":"r","id":"e","at":5}}`, "event.stream"},
		"end bad stream":  {`{"v":2,"room":"r","event":{"op":"stream_end","room":"r","id":"e","stream":"a b","at":5}}`, "event.stream"},
		"end no at":       {`{"v":2,"room":"r","event":{"op":"stream_end","room":"r","id":"e"}}`, "event.at"},
		"message no id2":  {`{"v":2,"room":"r","msg":{}}`, "envelope.msg.id"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := danmaku.UnmarshalEnvelope([]byte(tc.body))
			if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != tc.field {
				t.Fatalf("err = %v, want EINVALID on %s", err, tc.field)
			}
		})
	}
	if _, err := danmaku.MarshalEvent(danmaku.Event{Op: danmaku.OpDel, Room: "r", ID: "e"}); danmaku.ErrorField(err) != "event.ids" {
		t.Fatalf("MarshalEvent of a del without ids: %v", err)
	}
}

// Stream events are the archive's: job does not deliver them to comets.
func TestEventForViewers(t *testing.T) {
	for op, want := range map[string]bool{danmaku.OpDel: true, danmaku.OpBan: true, danmaku.OpStreamStart: false, danmaku.OpStreamEnd: false} {
		if got := (&danmaku.Event{Op: op}).ForViewers(); got != want {
			t.Errorf("%s: ForViewers = %v, want %v", op, got, want)
		}
	}
}

// The del event without its id is the del frame of the wire contract.
func TestDelEventIsTheWireFrame(t *testing.T) {
	b, _ := json.Marshal(danmaku.Event{Op: danmaku.OpDel, Room: "video_123", IDs: []string{"m1", "m2"}})
	want := `{"op":"del","room":"video_123","ids":["m1","m2"]}`
	if string(b) != want {
		t.Fatalf("frame\n got %s\nwant %s", b, want)
	}
}

// TestMessagePriority: a high-priority message carries "priority":1 and
// round-trips through the envelope; a normal one leaves the field out, so
// its wire form is what it was before lanes existed.
func TestMessagePriority(t *testing.T) {
	normal := danmaku.Message{ID: "n1", UID: 1, Name: "a", Content: "c", TS: 5}
	b, _ := json.Marshal(normal)
	if want := `{"id":"n1","uid":1,"name":"a","content":"c","ts":5}`; string(b) != want {
		t.Fatalf("normal message\n got %s\nwant %s", b, want)
	}
	high := normal
	high.ID, high.Priority, high.Pos = "h1", danmaku.PriorityHigh, 7
	b, _ = json.Marshal(high)
	if want := `{"id":"h1","uid":1,"name":"a","content":"c","ts":5,"priority":1,"pos":7}`; string(b) != want {
		t.Fatalf("high message\n got %s\nwant %s", b, want)
	}
	var back danmaku.Message
	if err := json.Unmarshal(b, &back); err != nil || back != high {
		t.Fatalf("decoded %+v (%v), want %+v", back, err, high)
	}
	rec, err := danmaku.MarshalEnvelope("r", danmaku.Message{ID: "h2", Priority: danmaku.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	env, err := danmaku.UnmarshalEnvelope(rec)
	if err != nil || !env.Msg.Priority.High() {
		t.Fatalf("envelope %s decoded %+v (%v)", rec, env.Msg, err)
	}
	if err := danmaku.Priority(2).Check("priority"); danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != "priority" {
		t.Fatalf("priority 2: %v", err)
	}
	for _, p := range []danmaku.Priority{danmaku.PriorityNormal, danmaku.PriorityHigh} {
		if err := p.Check("priority"); err != nil {
			t.Fatalf("%v: %v", p, err)
		}
	}
}
