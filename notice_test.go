package danmaku_test

import (
	"encoding/json"
	"testing"

	"github.com/danmaku/danmaku"
)

func TestNoticeEnvelopeRoundTrip(t *testing.T) {
	for _, user := range []string{"42", ""} {
		n := danmaku.Notice{ID: "n1", TS: 1730620801123, Content: "hi", Data: json.RawMessage(`{"gift":"rose"}`)}
		b, err := danmaku.MarshalNotice(user, n)
		if err != nil {
			t.Fatal(err)
		}
		e, err := danmaku.UnmarshalEnvelope(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if e.V != danmaku.NoticeEnvelopeVersion || e.Notice == nil || e.User != user || e.All != (user == "") ||
			e.Room != "" || e.Notice.ID != n.ID || e.Notice.TS != n.TS || e.Notice.Content != n.Content ||
			string(e.Notice.Data) != string(n.Data) {
			t.Fatalf("round trip of %q: %s -> %+v %+v", user, b, e, e.Notice)
		}
	}
}

func TestNoticeEnvelopeRejects(t *testing.T) {
	cases := map[string]struct{ body, field string }{
		"notice in v2":   {`{"v":2,"user":"7","notice":{"id":"n","content":"x"}}`, "envelope.v"},
		"no target":      {`{"v":3,"notice":{"id":"n","content":"x"}}`, "envelope.user"},
		"bad user":       {`{"v":3,"user":"a:b","notice":{"id":"n","content":"x"}}`, "envelope.user"},
		"user and all":   {`{"v":3,"user":"7","all":true,"notice":{"id":"n","content":"x"}}`, "envelope.user"},
		"no id":          {`{"v":3,"all":true,"notice":{"content":"x"}}`, "envelope.notice.id"},
		"empty":          {`{"v":3,"all":true,"notice":{"id":"n"}}`, "envelope.notice"},
		"room v3, no id": {`{"v":3,"room":"r","msg":{}}`, "envelope.msg.id"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := danmaku.UnmarshalEnvelope([]byte(tc.body))
			if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != tc.field {
				t.Fatalf("err = %v, want EINVALID on %s", err, tc.field)
			}
		})
	}
	if _, err := danmaku.MarshalNotice("7", danmaku.Notice{ID: "n"}); danmaku.ErrorField(err) != "envelope.notice" {
		t.Fatalf("MarshalNotice without content or data: %v", err)
	}
}

// The all push is the all frame; a notice without data leaves it out.
func TestNoticeFrameIsTheWireFrame(t *testing.T) {
	b, _ := json.Marshal(danmaku.NoticePush{Op: danmaku.OpAll, Msgs: []danmaku.Notice{{ID: "1", TS: 5, Content: "c"}}})
	want := `{"op":"all","msgs":[{"id":"1","ts":5,"content":"c"}]}`
	if string(b) != want {
		t.Fatalf("frame\n got %s\nwant %s", b, want)
	}
	f, _ := json.Marshal(danmaku.NoticeFrame{Op: danmaku.OpUser, Msgs: []danmaku.Notice{{ID: "2", TS: 6, Data: json.RawMessage(`{"a":1}`)}}})
	if want := `{"op":"user","msgs":[{"id":"2","ts":6,"data":{"a":1}}]}`; string(f) != want {
		t.Fatalf("frame\n got %s\nwant %s", f, want)
	}
}
