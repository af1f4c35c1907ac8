package logic

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
)

// stream/start and stream/end write stream events to the room's
// partition, in order with its messages; bad input is refused naming the
// field.
func TestAdminStreams(t *testing.T) {
	e, admin := adminEnv(t)
	room := testkit.Uniq("r")
	for path, bodies := range map[string]map[string]string{
		"/logic/admin/stream/start": {`{}`: "roomId", `{"roomId":"a:b"}`: "roomId", fmt.Sprintf(`{"roomId":"%s","streamId":"x y"}`, room): "streamId"},
		"/logic/admin/stream/end":   {`{"streamId":"s"}`: "roomId", fmt.Sprintf(`{"roomId":"%s","streamId":"x/y"}`, room): "streamId"},
	} {
		for body, field := range bodies {
			if r := admin(path, body); r.status != http.StatusBadRequest || r.errorBody(t).Field != field {
				t.Errorf("%s %s: %d %s, want 400 naming %s", path, body, r.status, r.body, field)
			}
		}
	}
	before := time.Now().UnixMilli()
	r := admin("/logic/admin/stream/start", fmt.Sprintf(`{"roomId":"%s","actor":"host"}`, room))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"streamId":"`) || !strings.Contains(string(r.body), `"action":"stream_start"`) {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	if r := admin("/logic/admin/stream/end", fmt.Sprintf(`{"roomId":"%s"}`, room)); r.status != http.StatusOK {
		t.Fatalf("end: %d %s", r.status, r.body)
	}
	if r := admin("/logic/admin/stream/start", fmt.Sprintf(`{"roomId":"%s","streamId":"talk-2"}`, room)); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"streamId":"talk-2"`) {
		t.Fatalf("start with an id: %d %s", r.status, r.body)
	}
	recs := readRoom(t, e, room, 3)
	var got []string
	for _, rec := range recs {
		env, err := danmaku.UnmarshalEnvelope(rec.Value)
		if err != nil || env.Event == nil || env.Event.At < before || env.Event.ID == "" {
			t.Fatalf("record %s: %v", rec.Value, err)
		}
		got = append(got, env.Event.Op+":"+env.Event.Stream)
	}
	start := strings.TrimPrefix(got[0], danmaku.OpStreamStart+":")
	if start == "" || got[1] != danmaku.OpStreamEnd+":" || got[2] != danmaku.OpStreamStart+":talk-2" {
		t.Errorf("records %v, want a start with a new id, an end of the live stream, a start of talk-2", got)
	}
}
