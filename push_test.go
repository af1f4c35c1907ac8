package danmaku_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/danmaku/danmaku"
)

// A push body decodes into the one shape of its op, wherever the op is
// among the keys, and encodes back to the same body.
func TestPushShapes(t *testing.T) {
	for body, op := range map[string]string{
		`{"op":"msgs","room":"r","epoch":"e","msgs":[{"id":"a","uid":7,"name":"n","content":"hi","ts":5,"pos":1}],"dels":2}`: danmaku.OpMsgs,
		`{"room":"r","op":"del","id":"ev","ids":["a"],"epoch":"e","dels":1}`:                                                 danmaku.OpDel,
		`{"op":"ban","room":"r","id":"ev","user":"42","until":99}`:                                                           danmaku.OpBan,
		`{"users":[{"user":"42","msgs":[{"id":"n","ts":1,"content":"x"}]}],"op":"user"}`:                                     danmaku.OpUser,
		`{"op":"all","msgs":[{"id":"n","ts":1,"data":{"k":1}}]}`:                                                             danmaku.OpAll,
	} {
		p, err := danmaku.UnmarshalPush([]byte(body))
		if err != nil || p.Op() != op {
			t.Fatalf("%s: op %q, %v", body, p.Op(), err)
		}
		set := 0
		for _, ok := range []bool{p.Batch != nil, p.Event != nil, p.Notices != nil} {
			if ok {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("%s: %d shapes set", body, set)
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, out, []byte(body)) {
			t.Errorf("%s encodes back as %s", body, out)
		}
	}
	if _, err := json.Marshal(danmaku.Push{}); err == nil {
		t.Error("an empty push encodes")
	}
}

// Bad pushes are refused naming the field.
func TestPushRejects(t *testing.T) {
	for body, field := range map[string]string{
		`{"op":"user","users":[{"user":"a:b","msgs":[{"id":"x"}]}]}`:    "users[0].user",
		`{"op":"user","users":[{"user":"7","msgs":[{"content":"x"}]}]}`: "users[0].msgs[0].id",
		`{"op":"all","msgs":[{"id":"a"},{"content":"x"}]}`:              "msgs[1].id",
		`{"users":[],"op":"user","extra":1} {}`:                         "body",
		`{"op":"msgs","room":"a b","msgs":[]}`:                          "room",
		`{"op":"msgs","room":"r","msgs":[{"id":"a"},{"pos":2}]}`:        "msgs[1].id",
		`{"op":"msgs","room":"r","msgs":"x"}`:                           "body",
		`{"op":"del","room":"r","id":"e"}`:                              "event.ids",
		`{"op":"ban","room":"r","id":"e","until":5}`:                    "event.user",
		`{"op":"join","room":"r"}`:                                      "op",
		`{"room":"r"}`:                                                  "op",
		`{"op":`:                                                        "body",
		`[]`:                                                            "body",
	} {
		_, err := danmaku.UnmarshalPush([]byte(body))
		if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != field {
			t.Errorf("push %s: %v, want invalid_argument on %s", body, err, field)
		}
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(va, vb)
}
