package logic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

// adminEnv is a logic Server with the admin API on.
func adminEnv(t *testing.T) (*testEnv, func(path, body string) response) {
	const secret = "admin-secret-0123456789"
	e := newEnv(t, func(c *Config, _ *testEnv) { c.AdminSecret = secret })
	return e, func(path, body string) response {
		return e.doWith(t, http.MethodPost, path, headers("Authorization", "Bearer "+secret), []byte(body))
	}
}

// A ban refuses the user's sends to the room (403 banned, with the time
// left) and not to others, writes a ban event to the room's partition, and
// unban lifts it.
func TestAdminBan(t *testing.T) {
	e, admin := adminEnv(t)
	room, other, uid := testkit.Uniq("r"), testkit.Uniq("r"), newUser()
	for body, field := range map[string]string{
		fmt.Sprintf(`{"userId":%d,"duration":"1m"}`, uid):                     "roomId",
		fmt.Sprintf(`{"roomId":"%s","duration":"1m"}`, room):                  "userId",
		fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"0s"}`, uid, room): "duration",
		fmt.Sprintf(`{"userId":%d,"roomId":"a:b","duration":"1m"}`, uid):      "roomId",
	} {
		if r := admin("/logic/admin/ban", body); r.status != http.StatusBadRequest || r.errorBody(t).Field != field {
			t.Errorf("ban %s: %d %s, want 400 naming %s", body, r.status, r.body, field)
		}
	}
	r := admin("/logic/admin/ban", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"1h","actor":"mod"}`, uid, room))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"action":"ban"`) || !strings.Contains(string(r.body), `"eventId"`) {
		t.Fatalf("ban: %d %s", r.status, r.body)
	}
	s := e.send(t, sendReq(room, uid, "hi"))
	if s.status != http.StatusForbidden || s.errorBody(t).Code != "banned" || s.errorBody(t).Field != "roomId" ||
		!strings.Contains(s.errorBody(t).Message, "for another 3600 s") {
		t.Fatalf("banned send: %d %s", s.status, s.body)
	}
	if s := e.send(t, sendReq(other, uid, "hi")); s.status != http.StatusAccepted {
		t.Fatalf("send to another room: %d %s", s.status, s.body)
	}
	env, err := danmaku.UnmarshalEnvelope(readRoom(t, e, room, 1)[0].Value)
	if err != nil || env.Event == nil || env.Event.Op != danmaku.OpBan || env.Event.User != fmt.Sprint(uid) ||
		env.Event.Until < time.Now().Add(59*time.Minute).UnixMilli() {
		t.Fatalf("ban record: %+v %+v %v", env, env.Event, err)
	}
	r = admin("/logic/admin/unban", fmt.Sprintf(`{"userId":%d,"roomId":"%s"}`, uid, room))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"removed":true`) {
		t.Fatalf("unban: %d %s", r.status, r.body)
	}
	if s := e.send(t, sendReq(room, uid, "back")); s.status != http.StatusAccepted {
		t.Fatalf("after unban: %d %s", s.status, s.body)
	}
	if n := e.counter(t, "danmaku_logic_send_refused_total"); n != 1 {
		t.Errorf("refused sends counted %v, want 1", n)
	}
}

// A delete writes one del event with the ids to the room's partition, in
// order after the room's messages; bad input is refused naming the field.
func TestAdminDelete(t *testing.T) {
	e, admin := adminEnv(t)
	room, uid := testkit.Uniq("r"), newUser()
	sent := e.send(t, sendReq(room, uid, "one", "two"))
	if sent.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", sent.status, sent.body)
	}
	ids := sent.ids(t)
	many := make([]string, danmaku.MaxDelIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"m%d"`, i)
	}
	for body, field := range map[string]string{
		`{"ids":["a"]}`:                                                          "roomId",
		fmt.Sprintf(`{"roomId":"%s"}`, room):                                     "ids",
		fmt.Sprintf(`{"roomId":"%s","ids":["ok","a b"]}`, room):                  "ids[1]",
		fmt.Sprintf(`{"roomId":"%s","ids":[%s]}`, room, strings.Join(many, ",")): "ids",
	} {
		if r := admin("/logic/admin/delete", body); r.status != http.StatusBadRequest || r.errorBody(t).Field != field {
			t.Errorf("delete %s: %d %s, want 400 naming %s", body, r.status, r.body, field)
		}
	}
	r := admin("/logic/admin/delete", fmt.Sprintf(`{"roomId":"%s","ids":["%s"],"actor":"mod"}`, room, ids[1]))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"ids":["`+ids[1]+`"]`) {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	recs := readRoom(t, e, room, 3)
	env, err := danmaku.UnmarshalEnvelope(recs[2].Value)
	if err != nil || env.Event == nil || env.Event.Op != danmaku.OpDel || len(env.Event.IDs) != 1 || env.Event.IDs[0] != ids[1] ||
		env.Event.ID == "" || recs[2].Partition != recs[0].Partition {
		t.Fatalf("del record after the messages: %+v %+v %v", env, env.Event, err)
	}
	if n := e.counter(t, "danmaku_logic_admin_actions_total"); n != 5 {
		t.Errorf("admin actions counted %v, want 5 (4 failed, 1 done)", n)
	}
}

// GET /logic/history leaves deleted messages out; the positions of the
// others do not move and through lets a reader page past a deleted tail.
func TestHistoryLeavesDeletedOut(t *testing.T) {
	e := newEnv(t)
	room := testkit.Uniq("r")
	ids := writeHistory(t, e, room, 5, 100)
	s := route.New(e.rdb)
	ctx := context.Background()
	b, err := s.BeginEvent(ctx, danmaku.Event{Op: danmaku.OpDel, Room: room, ID: testkit.Uniq("ev"), IDs: []string{ids[1], ids[4]}},
		route.EventOptions{Owner: "job-a", ClaimTTL: time.Second, LockTTL: time.Second})
	if err != nil || b.Status != route.Acquired || b.Tombstoned != 2 {
		t.Fatalf("delete: %+v %v", b, err)
	}
	s.ReleaseLock(ctx, b.Lock)
	h, r := e.history(t, "roomId="+room+"&since=0")
	if r.status != http.StatusOK || h.Pos != 5 || h.Through != 5 || len(h.Messages) != 3 {
		t.Fatalf("history: %d %s", r.status, r.body)
	}
	for i, want := range []int{0, 2, 3} {
		if m := h.Messages[i]; m.ID != ids[want] || m.Pos != int64(want+1) || m.Deleted {
			t.Fatalf("message %d: %+v, want %s at %d", i, m, ids[want], want+1)
		}
	}
	if strings.Contains(string(r.body), "deleted") {
		t.Fatalf("a tombstone reached the answer: %s", r.body)
	}
	if h, _ := e.history(t, "roomId="+room+"&since=4"); len(h.Messages) != 0 || h.Through != 5 {
		t.Fatalf("a page of only a deleted message: %+v", h)
	}
	if h, _ := e.history(t, "roomId="+room+"&since=5"); len(h.Messages) != 0 || h.Through != 0 {
		t.Fatalf("up to date: %+v", h)
	}
}

// A delete sends a del only for ids that are messages of the room: in its
// history, or generated and accepted a moment ago (on their way). The
// answer counts them and lists the others; none found is 404, no event.
func TestAdminDeleteFindsMessages(t *testing.T) {
	e, admin := adminEnv(t)
	room, uid := testkit.Uniq("r"), newUser()
	sent := e.send(t, sendReq(room, uid, "one"))
	if sent.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", sent.status, sent.body)
	}
	recent := sent.ids(t)[0]
	old := sendpath.EncodeID(uint64(time.Now().Add(-time.Hour).UnixMilli()), 1, 1)
	r := admin("/logic/admin/delete", fmt.Sprintf(`{"roomId":"%s","ids":["%s","%s","u7-never","nope"]}`, room, recent, old))
	var resp AdminResponse
	json.Unmarshal(r.body, &resp)
	if r.status != http.StatusOK || resp.Found != 1 || len(resp.IDs) != 1 || resp.IDs[0] != recent ||
		!slices.Equal(resp.Missing, []string{old, "u7-never", "nope"}) {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	r = admin("/logic/admin/delete", fmt.Sprintf(`{"roomId":"%s","ids":["%s","u7-never"]}`, room, old))
	if r.status != http.StatusNotFound || r.errorBody(t).Field != "ids" {
		t.Fatalf("delete of no message: %d %s", r.status, r.body)
	}
	// A later delete's event follows the first: the 404 wrote none.
	if r := admin("/logic/admin/delete", fmt.Sprintf(`{"roomId":"%s","ids":["%s"]}`, room, recent)); r.status != http.StatusOK {
		t.Fatalf("second delete: %d %s", r.status, r.body)
	}
	recs := readRoom(t, e, room, 3)
	for _, rec := range recs[1:] {
		env, err := danmaku.UnmarshalEnvelope(rec.Value)
		if err != nil || env.Event == nil || !slices.Equal(env.Event.IDs, []string{recent}) {
			t.Fatalf("del record: %+v %v", env.Event, err)
		}
	}
}
