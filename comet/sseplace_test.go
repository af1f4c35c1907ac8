package comet

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/danmaku/danmaku"
)

// msgsMark reads what a full decode reads from every layout of a msgs
// frame the comet writes, contents that look like positions included.
func TestSSEMsgsMark(t *testing.T) {
	msgs := []danmaku.Message{
		{ID: "a", UID: 1, Name: "ann", Content: `tricky ,"pos":999}] "x"`, TS: 1, Pos: 41},
		{ID: "b", UID: 2, Name: "bob", Content: `\"pos\":7}]}`, TS: 2, Priority: danmaku.PriorityHigh, Pos: 42},
	}
	enc := func(m danmaku.Message) []byte {
		m.Pos = 0
		b, _ := json.Marshal(m)
		return b
	}
	type want struct {
		room, epoch string
		last        int64
	}
	cases := map[string]struct {
		frame []byte
		want  want
	}{}
	for _, b := range []danmaku.Batch{
		{Op: danmaku.OpMsgs, Room: "r1", Epoch: "9f2c", Msgs: msgs},
		{Op: danmaku.OpMsgs, Room: "r.2", Epoch: "9f2c", Replay: true, Skipped: 12, Msgs: msgs},
		{Op: danmaku.OpMsgs, Room: "r-3", Epoch: "e", Skipped: 3, Dels: 4, Msgs: msgs[:1]},
		{Op: danmaku.OpMsgs, Room: "shadow", Msgs: []danmaku.Message{{ID: "s", Content: "hidden"}}},
	} {
		marshalled, _ := json.Marshal(b)
		w := want{b.Room, b.Epoch, b.Msgs[len(b.Msgs)-1].Pos}
		cases["marshal "+b.Room] = struct {
			frame []byte
			want  want
		}{marshalled, w}
		var raw [][]byte
		var pos []int64
		for _, m := range b.Msgs {
			raw, pos = append(raw, enc(m)), append(pos, m.Pos)
		}
		cases["append "+b.Room] = struct {
			frame []byte
			want  want
		}{danmaku.AppendBatchJSON(nil, b, raw, pos), w}
	}
	for name, c := range cases {
		room, epoch, last, ok := msgsMark(c.frame)
		if !ok || (want{room, epoch, last}) != c.want {
			t.Errorf("%s: %s %s %d %v, want %+v (%s)", name, room, epoch, last, ok, c.want, c.frame)
		}
	}
	for _, other := range []string{`{"op":"welcome","room":"r1"}`, `{"op":"del","room":"r1","ids":["a"]}`, `not json`} {
		if _, _, _, ok := msgsMark([]byte(other)); ok {
			t.Errorf("%s read as a msgs frame", other)
		}
	}
}

// A stream's event ids follow the rooms it holds and where it stands in
// each, and a Last-Event-ID turns back into the rooms, since and epoch
// that resume them; a malformed one is refused naming the header.
func TestSSEEventID(t *testing.T) {
	r := httptest.NewRequest("GET", "/sse?room=a&since=5&epoch=e1&room=b", nil)
	p := newSSEPlace(r, 8)
	step := func(frame, want string) {
		t.Helper()
		id, moved := p.frame([]byte(frame))
		if want == "-" {
			if moved {
				t.Errorf("%s moved the stream to %q", frame, id)
			}
			return
		}
		if !moved || id != want {
			t.Errorf("after %s: id %q (%v), want %q", frame, id, moved, want)
		}
	}
	step(`{"op":"welcome","room":"a","epoch":"e1","pos":9,"recovered":true}`, "a:e1:5")
	step(`{"op":"welcome","room":"b","epoch":"e2","pos":3}`, "a:e1:5 b:e2:3")
	step(`{"op":"msgs","room":"a","epoch":"e1","replay":true,"msgs":[{"id":"x","pos":6},{"id":"y","pos":9}]}`, "a:e1:9 b:e2:3")
	step(`{"op":"msgs","room":"b","msgs":[{"id":"s","content":"shadow"}]}`, "-")
	step(`{"op":"online","room":"b","online":3}`, "-")
	step(`{"op":"msgs","room":"b","epoch":"e3","msgs":[{"id":"z","pos":1}]}`, "a:e1:9 b:e3:1")
	p.posted([]byte(`{"op":"sub","room":"c","since":0}`))
	step(`{"op":"welcome","room":"c","epoch":"e4","pos":2,"recovered":true}`, "a:e1:9 b:e3:1 c:e4:0")
	step(`{"op":"unsubscribed","room":"b"}`, "a:e1:9 c:e4:0")
	step(`{"op":"error","code":"rate_limited","message":"slow down"}`, "-")
	step(`{"op":"error","code":"banned","room":"c","message":"banned"}`, "a:e1:9")
	p.posted([]byte(`{"op":"join","room":"d"}`))
	step(`{"op":"msgs","room":"a","epoch":"e1","msgs":[{"id":"w","pos":10}]}`, "a:e1:10")
	step(`{"op":"welcome","room":"d","epoch":"","pos":0}`, "d::0")

	q, err := eventIDQuery(url.Values{"room": {"x"}, "since": {"1"}, "epoch.x": {"e"}, "uid": {"7"}, "density": {"30"}}, "a:e1:10 d::0")
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{"room": {"a", "d"}, "since.a": {"10"}, "epoch.a": {"e1"}, "since.d": {"0"}, "epoch.d": {""}, "uid": {"7"}, "density": {"30"}}
	if q.Encode() != want.Encode() {
		t.Errorf("query %s, want %s", q.Encode(), want.Encode())
	}
	r = httptest.NewRequest("GET", "/sse?"+q.Encode(), nil)
	reqs := roomsOfURL(r, 8).reqs
	if len(reqs) != 2 || reqs[0] != (joinReq{room: "a", resume: true, since: 10, epoch: "e1"}) || reqs[1] != (joinReq{room: "d", resume: true}) {
		t.Errorf("the comet reads %+v", reqs)
	}
	for _, bad := range []string{"a", "a:e1", "a:e1:-1", "a:e1:x", "b@d:e:1", "a:e f:1", "a:" + string(make([]byte, 65)) + ":1"} {
		_, err := eventIDQuery(url.Values{}, bad)
		var e *danmaku.Error
		if !errors.As(err, &e) || e.Code != danmaku.EINVALID || e.Field != "Last-Event-ID" {
			t.Errorf("Last-Event-ID %q: %v, want invalid_argument naming the header", bad, err)
		}
	}
}
