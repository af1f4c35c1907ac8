package logic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/internal/testkit"
)

func TestSendValidation(t *testing.T) {
	e := newEnv(t)
	room := testkit.Uniq("r")
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	valid := func(mut func(r *SendRequest)) string {
		r := sendReq(room, newUser(), "hello")
		mut(&r)
		return js(r)
	}
	many := make([]SendMessage, 51)
	for i := range many {
		many[i] = SendMessage{Content: "x"}
	}
	cases := []struct {
		name        string
		method      string // default POST
		contentType string // default application/json; "-" for none
		body        string
		status      int
		code        string
		field       string
	}{
		{name: "ok", body: valid(func(*SendRequest) {}), status: 202},
		{name: "ok multibyte at limits", body: valid(func(r *SendRequest) {
			r.UserName = repeat("名", 32)
			r.Messages = []SendMessage{{Content: repeat("弹", 200)}}
		}), status: 202},
		{name: "ok content type with charset", contentType: "application/json; charset=utf-8", body: valid(func(*SendRequest) {}), status: 202},
		{name: "bad json", body: `{"roomId":`, status: 400, code: "invalid_argument", field: "body"},
		{name: "not json", body: `hello`, status: 400, code: "invalid_argument", field: "body"},
		{name: "empty body", body: ``, status: 400, code: "invalid_argument", field: "body"},
		{name: "trailing data", body: valid(func(*SendRequest) {}) + `{}`, status: 400, code: "invalid_argument", field: "body"},
		{name: "json array", body: `[]`, status: 400, code: "invalid_argument", field: "body"},
		{name: "unknown field", body: `{"roomId":"a","userId":1,"userName":"n","messages":[{"content":"x"}],"color":"red"}`, status: 400, code: "invalid_argument", field: "color"},
		{name: "misspelt msgId", body: `{"roomId":"a","userId":1,"userName":"n","messages":[{"content":"x","msg_id":"k"}]}`, status: 400, code: "invalid_argument", field: "messages[0].msg_id"},
		{name: "room missing", body: valid(func(r *SendRequest) { r.RoomID = "" }), status: 400, code: "invalid_argument", field: "roomId"},
		{name: "room bad chars", body: valid(func(r *SendRequest) { r.RoomID = "room:1" }), status: 400, code: "invalid_argument", field: "roomId"},
		{name: "room too long", body: valid(func(r *SendRequest) { r.RoomID = repeat("r", 65) }), status: 400, code: "invalid_argument", field: "roomId"},
		{name: "user missing", body: valid(func(r *SendRequest) { r.UserID = 0 }), status: 400, code: "invalid_argument", field: "userId"},
		{name: "user negative", body: valid(func(r *SendRequest) { r.UserID = -5 }), status: 400, code: "invalid_argument", field: "userId"},
		{name: "user as string", body: `{"roomId":"a","userId":"12","userName":"n","messages":[{"content":"x"}]}`, status: 400, code: "invalid_argument", field: "userId"},
		{name: "user fractional", body: `{"roomId":"a","userId":1.5,"userName":"n","messages":[{"content":"x"}]}`, status: 400, code: "invalid_argument", field: "userId"},
		{name: "user overflow", body: `{"roomId":"a","userId":99999999999999999999,"userName":"n","messages":[{"content":"x"}]}`, status: 400, code: "invalid_argument", field: "userId"},
		{name: "name empty", body: valid(func(r *SendRequest) { r.UserName = "" }), status: 400, code: "invalid_argument", field: "userName"},
		{name: "name blank", body: valid(func(r *SendRequest) { r.UserName = "  " }), status: 400, code: "invalid_argument", field: "userName"},
		{name: "name too long", body: valid(func(r *SendRequest) { r.UserName = repeat("名", 33) }), status: 400, code: "invalid_argument", field: "userName"},
		{name: "name control char", body: valid(func(r *SendRequest) { r.UserName = "a\nb" }), status: 400, code: "invalid_argument", field: "userName"},
		{name: "messages missing", body: valid(func(r *SendRequest) { r.Messages = nil }), status: 400, code: "invalid_argument", field: "messages"},
		{name: "messages empty", body: valid(func(r *SendRequest) { r.Messages = []SendMessage{} }), status: 400, code: "invalid_argument", field: "messages"},
		{name: "messages too many", body: valid(func(r *SendRequest) { r.Messages = many }), status: 400, code: "invalid_argument", field: "messages"},
		{name: "messages not array", body: `{"roomId":"a","userId":1,"userName":"n","messages":{"content":"x"}}`, status: 400, code: "invalid_argument", field: "messages"},
		{name: "content not string", body: `{"roomId":"a","userId":1,"userName":"n","messages":[{"content":"x"},{"content":5}]}`, status: 400, code: "invalid_argument", field: "messages[1].content"},
		{name: "message not object", body: `{"roomId":"a","userId":1,"userName":"n","messages":[{"content":"x"},"y"]}`, status: 400, code: "invalid_argument", field: "messages[1]"},
		{name: "message unknown field", body: `{"roomId":"a","userId":1,"userName":"n","messages":[{"content":"x","color":"red"}]}`, status: 400, code: "invalid_argument", field: "messages[0].color"},
		{name: "message null", body: `{"roomId":"a","userId":1,"userName":"n","messages":[null]}`, status: 400, code: "invalid_argument", field: "messages[0].content"},
		{name: "content empty", body: valid(func(r *SendRequest) { r.Messages = []SendMessage{{Content: ""}} }), status: 400, code: "invalid_argument", field: "messages[0].content"},
		{name: "content blank", body: valid(func(r *SendRequest) { r.Messages = []SendMessage{{Content: "x"}, {Content: " \n "}} }), status: 400, code: "invalid_argument", field: "messages[1].content"},
		{name: "content too long", body: valid(func(r *SendRequest) { r.Messages = []SendMessage{{Content: "x"}, {Content: repeat("弹", 201)}} }), status: 400, code: "invalid_argument", field: "messages[1].content"},
		{name: "content control char", body: valid(func(r *SendRequest) { r.Messages = []SendMessage{{Content: "a\x00b"}} }), status: 400, code: "invalid_argument", field: "messages[0].content"},
		{name: "msgId bad chars", body: valid(func(r *SendRequest) { r.Messages[0].MsgID = "a b" }), status: 400, code: "invalid_argument", field: "messages[0].msgId"},
		{name: "msgId too long", body: valid(func(r *SendRequest) { r.Messages[0].MsgID = repeat("k", 64) }), status: 400, code: "invalid_argument", field: "messages[0].msgId"},
		{name: "msgId duplicate", body: valid(func(r *SendRequest) {
			r.Messages = []SendMessage{{Content: "a", MsgID: "k1"}, {Content: "b", MsgID: "k1"}}
		}), status: 400, code: "invalid_argument", field: "messages[1].msgId"},
		// The body is refused where the first fault is: a syntax error early in a body over the limit is a 400.
		{name: "bad json in a large body", body: `{"roomId":x` + repeat(" ", 70<<10), status: 400, code: "invalid_argument", field: "body"},
		{name: "body too large", body: `{"roomId":"a","userId":1,"userName":"n","messages":[{"content":"` + repeat("x", 70<<10) + `"}]}`, status: 413, code: "payload_too_large", field: "body"},
		{name: "content type text", contentType: "text/plain", body: valid(func(*SendRequest) {}), status: 415, code: "unsupported_media_type", field: "Content-Type"},
		{name: "content type form", contentType: "application/x-www-form-urlencoded", body: valid(func(*SendRequest) {}), status: 415, code: "unsupported_media_type", field: "Content-Type"},
		{name: "content type missing", contentType: "-", body: valid(func(*SendRequest) {}), status: 415, code: "unsupported_media_type", field: "Content-Type"},
		{name: "method GET", method: http.MethodGet, status: 405, code: "method_not_allowed", field: "method"},
		{name: "method PUT", method: http.MethodPut, body: valid(func(*SendRequest) {}), status: 405, code: "method_not_allowed", field: "method"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, ct := tc.method, tc.contentType
			if method == "" {
				method = http.MethodPost
			}
			switch ct {
			case "":
				ct = "application/json"
			case "-":
				ct = ""
			}
			r := e.do(t, method, "/logic/send", ct, []byte(tc.body))
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", r.status, tc.status, r.body)
			}
			if ctype := r.header.Get("Content-Type"); ctype != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ctype)
			}
			if tc.status == http.StatusAccepted {
				if ids := r.ids(t); len(ids) != 1 {
					t.Fatalf("ids = %v, want one", ids)
				}
				return
			}
			got := r.errorBody(t)
			if got.Code != tc.code || got.Field != tc.field || got.Message == "" {
				t.Fatalf("error = %+v, want code %q field %q and a message", got, tc.code, tc.field)
			}
			if tc.status == http.StatusMethodNotAllowed && r.header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q, want POST", r.header.Get("Allow"))
			}
		})
	}
}

// Accepted messages are on the topic, keyed by room, with every field, on
// one partition, in request order.
func TestSendProducesToKafka(t *testing.T) {
	e := newEnv(t)
	room, uid := testkit.Uniq("r"), newUser()
	before := time.Now().UnixMilli()
	req := SendRequest{RoomID: room, UserID: uid, UserName: "阿狸", Messages: []SendMessage{
		{Content: "first"}, {Content: "second\nline", MsgID: "client-1"}, {Content: "third"},
	}}
	r := e.send(t, req)
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	after := time.Now().UnixMilli()
	ids := r.ids(t)
	want := fmt.Sprintf("u%d-client-1", uid)
	if len(ids) != 3 || ids[1] != want {
		t.Fatalf("ids = %v, want 3 with the second %q", ids, want)
	}
	if !(ids[0] < ids[2]) || len(ids[0]) != sendpath.IDLen {
		t.Fatalf("generated ids %q, %q not time-ordered fixed-width", ids[0], ids[2])
	}
	for _, id := range ids {
		if err := danmaku.CheckID("id", id); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
	}

	got := readRoom(t, e, room, 3)
	partition := got[0].Partition
	for i, m := range got {
		if string(m.Key) != room {
			t.Errorf("record %d key = %q, want %q", i, m.Key, room)
		}
		if m.Partition != partition {
			t.Errorf("record %d on partition %d, first on %d", i, m.Partition, partition)
		}
		env, err := danmaku.UnmarshalEnvelope(m.Value)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		msg := env.Msg
		if env.Room != room || msg.ID != ids[i] || msg.UID != uid || msg.Name != "阿狸" || msg.Content != req.Messages[i].Content {
			t.Errorf("record %d = %+v, want room %s id %s uid %d content %q", i, env, room, ids[i], uid, req.Messages[i].Content)
		}
		if msg.TS < before || msg.TS > after {
			t.Errorf("record %d ts %d not within [%d, %d]", i, msg.TS, before, after)
		}
	}
	if n := e.counter(t, "danmaku_logic_messages_accepted_total"); n != 3 {
		t.Errorf("messages accepted = %v, want 3", n)
	}
}

// A retry with the same client msgId (plain or already namespaced) gets the
// same id; another user with the same key gets a different one.
func TestSendClientMsgIDIdempotent(t *testing.T) {
	e := newEnv(t)
	room, uid, other := testkit.Uniq("r"), newUser(), newUser()
	send := func(uid int64, key string) string {
		t.Helper()
		req := sendReq(room, uid, "hi")
		req.Messages[0].MsgID = key
		r := e.send(t, req)
		if r.status != http.StatusAccepted {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		return r.ids(t)[0]
	}
	first := send(uid, "retry-key")
	if again := send(uid, "retry-key"); again != first {
		t.Fatalf("retry got %q, first %q", again, first)
	}
	if again := send(uid, first); again != first {
		t.Fatalf("retry with the returned id got %q, want %q", again, first)
	}
	if theirs := send(other, "retry-key"); theirs == first {
		t.Fatalf("two users share id %q", theirs)
	}
	// Spoofing another user's namespace only nests it under one's own.
	if spoof := send(other, first); spoof == first || !strings.HasPrefix(spoof, fmt.Sprintf("u%d-", other)) {
		t.Fatalf("user %d sending %q got %q", other, first, spoof)
	}
	// All five were produced; dedup by id is job's work.
	recs := readRoom(t, e, room, 5)
	for i := 0; i < 3; i++ {
		env, _ := danmaku.UnmarshalEnvelope(recs[i].Value)
		if env.Msg.ID != first {
			t.Errorf("record %d id %q, want %q", i, env.Msg.ID, first)
		}
	}
}

// readRoom reads n records of room from the topic with a consumer group
// of its own.
func readRoom(t *testing.T, e *testEnv, room string, n int) []kafka.Message {
	t.Helper()
	rd := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           e.broker.Brokers(),
		Topic:             testTopic,
		GroupID:           "test-" + room,
		StartOffset:       kafka.FirstOffset,
		SessionTimeout:    time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		RebalanceTimeout:  2 * time.Second,
		MaxWait:           100 * time.Millisecond,
		MinBytes:          1,
		MaxBytes:          1 << 20,
	})
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []kafka.Message
	for len(out) < n {
		m, err := rd.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, err)
		}
		if string(m.Key) == room {
			out = append(out, m)
		}
	}
	return out
}

// Keys are case-sensitive and given once; user ids fit a JavaScript
// number. Each refusal names the field.
func TestSendKeysAndUserIDs(t *testing.T) {
	e := newEnv(t)
	cases := []struct{ name, body, field string }{
		{"duplicate roomId", `{"roomId":"a","roomId":"b","userId":1,"userName":"n","messages":[{"content":"x"}]}`, "roomId"},
		{"duplicate userId", `{"roomId":"a","userId":1,"userName":"n","userId":2,"messages":[{"content":"x"}]}`, "userId"},
		{"duplicate content", `{"roomId":"a","userId":1,"userName":"n","messages":[{"content":"x"},{"content":"x","content":"y"}]}`, "messages[1].content"},
		{"duplicate msgId", `{"roomId":"a","userId":1,"userName":"n","messages":[{"content":"x","msgId":"a","msgId":"b"}]}`, "messages[0].msgId"},
		{"upper case", `{"ROOMID":"a","userId":1,"userName":"n","messages":[{"content":"x"}]}`, "ROOMID"},
		{"wrong case beside the right one", `{"roomId":"a","RoomId":"b","userId":1,"userName":"n","messages":[{"content":"x"}]}`, "RoomId"},
		{"escaped wrong case", `{"room\u0069d":"a","userId":1,"userName":"n","messages":[{"content":"x"}]}`, "roomid"},
		{"message key case", `{"roomId":"a","userId":1,"userName":"n","messages":[{"Content":"x"}]}`, "messages[0].Content"},
		{"user id above 2^53", `{"roomId":"a","userId":9007199254740992,"userName":"n","messages":[{"content":"x"}]}`, "userId"},
		{"largest int64", `{"roomId":"a","userId":9223372036854775807,"userName":"n","messages":[{"content":"x"}]}`, "userId"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, http.MethodPost, "/logic/send", "application/json", []byte(tc.body))
			if eb := r.errorBody(t); r.status != http.StatusBadRequest || eb.Field != tc.field {
				t.Fatalf("%d %s, want 400 naming %s", r.status, r.body, tc.field)
			}
		})
	}
	ok := `{"roomId":"a","userId":9007199254740991,"userName":"n","messages":[{"content":"x","msgId":"k"},{"msgId":"l","content":"y"}]}`
	if r := e.do(t, http.MethodPost, "/logic/send", "application/json", []byte(ok)); r.status != http.StatusAccepted {
		t.Fatalf("largest user id: %d %s", r.status, r.body)
	}
}
