package comet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
	"github.com/danmaku/danmaku/route"
)

// readNotices reads the next frame, which must be a notice frame of op.
func readNotices(t *testing.T, ws *wsviewer.Conn, op string) []danmaku.Notice {
	t.Helper()
	f, data, err := ws.Next(5 * time.Second)
	if err != nil || f.Op != op || f.Notices == nil {
		t.Fatalf("frame %s, want op %s (%v)", data, op, err)
	}
	return f.Notices.Msgs
}

func noticeIDs(ns []danmaku.Notice) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

func pushNotices(t *testing.T, s *Server, p danmaku.NoticePush) int {
	t.Helper()
	body, _ := json.Marshal(p)
	n, err := push.NewClient(testSecret, 2*time.Second).Push(context.Background(), s.AdvertiseAddr(), body)
	if err != nil {
		t.Fatalf("push %s: %v", body, err)
	}
	return n
}

// TestNoticeToUser: a user push reaches every connection of the user on
// this comet (in a room, in another, in none) as one user frame with the
// notices' content and data, and nobody else; a redelivered notice is not
// sent again; a closed tab leaves the user's connections.
func TestNoticeToUser(t *testing.T) {
	keys := tokens.New(t)
	s := startWithKeys(t, keys, nil)
	uid, other := uniqUID(), uniqUID()
	u := strconv.FormatInt(uid, 10)
	tok := "&token=" + keys.Token(t, uid, "", nil)
	r1, r2 := testkit.Uniq("r"), testkit.Uniq("r")
	tabs := []*wsviewer.Conn{
		mustDial(t, s, "room="+r1+"&uid="+u+tok),
		mustDial(t, s, "room="+r2+tok),
		mustDial(t, s, "uid="+u+tok),
	}
	mustReadOp(t, tabs[0], opWelcome)
	mustReadOp(t, tabs[1], opWelcome)
	bystanders := []*wsviewer.Conn{mustDial(t, s, "room="+r1+"&token="+keys.Token(t, other, "", nil)), mustDial(t, s, "room="+r1)}
	for _, ws := range bystanders {
		mustReadOp(t, ws, opWelcome)
	}
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if n := len(s.hub.users.appendConns(u, nil)); n != 3 {
			return fmt.Errorf("user connections %d, want 3", n)
		}
		return nil
	})
	n1 := danmaku.Notice{ID: testkit.Uniq("n"), TS: 5, Content: "your comment was removed"}
	n2 := danmaku.Notice{ID: testkit.Uniq("n"), TS: 6, Data: json.RawMessage(`{"gift":"rose"}`)}
	p := danmaku.NoticePush{Op: danmaku.OpUser, Users: []danmaku.UserNotices{
		{User: u, Msgs: []danmaku.Notice{n1, n2}}, {User: testkit.Uniq("absent"), Msgs: []danmaku.Notice{{ID: testkit.Uniq("n"), Content: "x"}}}}}
	if got := pushNotices(t, s, p); got != 3 {
		t.Fatalf("delivered %d, want 3 (one frame per tab)", got)
	}
	for i, ws := range tabs {
		got := readNotices(t, ws, danmaku.OpUser)
		if len(got) != 2 || got[0].Content != n1.Content || got[0].TS != 5 || string(got[1].Data) != `{"gift":"rose"}` || got[1].ID != n2.ID {
			t.Fatalf("tab %d got %+v", i, got)
		}
	}
	for _, ws := range bystanders {
		expectNoFrame(t, ws, 200*time.Millisecond)
	}

	// The same push again is dropped; a push with one old and one new
	// notice carries the new one only.
	if got := pushNotices(t, s, p); got != 0 {
		t.Fatalf("redelivery handed to %d tabs, want 0", got)
	}
	n3 := danmaku.Notice{ID: testkit.Uniq("n"), Content: "three"}
	pushNotices(t, s, danmaku.NoticePush{Op: danmaku.OpUser, Users: []danmaku.UserNotices{{User: u, Msgs: []danmaku.Notice{n2, n3}}}})
	for _, ws := range tabs {
		if got := noticeIDs(readNotices(t, ws, danmaku.OpUser)); !slices.Equal(got, []string{n3.ID}) {
			t.Fatalf("after a partial redelivery got %v, want only %s", got, n3.ID)
		}
	}
	if d := value(t, s.metrics.duplicateMsgs); d != 4 {
		t.Errorf("duplicates counted %v, want 4", d)
	}

	tabs[2].Close()
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if n := len(s.hub.users.appendConns(u, nil)); n != 2 {
			return fmt.Errorf("user connections after a close %d, want 2", n)
		}
		return nil
	})
	n4 := danmaku.Notice{ID: testkit.Uniq("n"), Content: "four"}
	if got := pushNotices(t, s, danmaku.NoticePush{Op: danmaku.OpUser, Users: []danmaku.UserNotices{{User: u, Msgs: []danmaku.Notice{n4}}}}); got != 2 {
		t.Fatalf("after a tab closed: delivered %d, want 2", got)
	}
}

// With auth off a uid parameter is a claim anybody can make: a viewer that
// names user 42 without a token proving it gets none of user 42's notices,
// whether or not the comet has keys; the user's own tab, with a token,
// gets them. A token that fails verification is refused at the door even
// with auth off.
func TestUserNoticesNeedProof(t *testing.T) {
	keys := tokens.New(t)
	withKeys := startWithKeys(t, keys, nil)
	noKeys, _ := mustStart(t, nil)
	uid := uniqUID()
	u := strconv.FormatInt(uid, 10)
	for name, s := range map[string]*Server{"keys": withKeys, "no keys": noKeys} {
		t.Run(name, func(t *testing.T) {
			room := testkit.Uniq("r")
			thief := mustDial(t, s, "room="+room+"&uid="+u)
			mustReadOp(t, thief, opWelcome)
			var owner *wsviewer.Conn
			if s == withKeys {
				owner = mustDial(t, s, "room="+room+"&token="+keys.Token(t, uid, "", nil))
				mustReadOp(t, owner, opWelcome)
				_, resp, err := wsviewer.TryDial(wsURL(s, "room="+room+"&token="+keys.Attacks(t, uid)[0].Token), nil)
				if err == nil || resp == nil || resp.StatusCode != 401 {
					t.Fatalf("expired token with auth off: %v %v, want 401", resp, err)
				}
			}
			n := danmaku.Notice{ID: testkit.Uniq("n"), Content: "your order shipped to 1 Main St"}
			got := pushNotices(t, s, danmaku.NoticePush{Op: danmaku.OpUser, Users: []danmaku.UserNotices{{User: u, Msgs: []danmaku.Notice{n}}}})
			if owner != nil {
				if ids := noticeIDs(readNotices(t, owner, danmaku.OpUser)); got != 1 || !slices.Equal(ids, []string{n.ID}) {
					t.Fatalf("owner got %v (delivered %d)", ids, got)
				}
			} else if got != 0 {
				t.Fatalf("delivered to %d connections, want 0", got)
			}
			expectNoFrame(t, thief, 300*time.Millisecond)
		})
	}
}

var lastUID atomic.Int64

// uniqUID returns a user id no other test of the process uses.
func uniqUID() int64 {
	return time.Now().UnixMilli()%1_000_000_000*1000 + lastUID.Add(1)%1000
}

// startWithKeys starts a comet with auth off (unless mutate turns it on)
// and a verifier of keys, so viewers may prove their uid with a token.
func startWithKeys(t *testing.T, keys *tokens.Keys, mutate func(*Config)) *Server {
	t.Helper()
	cfg := testConfig(t)
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, Deps{Store: route.New(redisserver.Client(t)), Verifier: keys.Verifier(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// TestNoticeToAll: a broadcast reaches every connection once, in a room or
// not, with a user id or without; a redelivery is dropped.
func TestNoticeToAll(t *testing.T) {
	s, _ := mustStart(t, nil)
	room := testkit.Uniq("r")
	var conns []*wsviewer.Conn
	for i := 0; i < 4; i++ {
		ws := mustDial(t, s, "room="+room+"&uid=u"+strconv.Itoa(i))
		mustReadOp(t, ws, opWelcome)
		conns = append(conns, ws)
	}
	conns = append(conns, mustDial(t, s, ""), mustDial(t, s, "room="+testkit.Uniq("r")))
	mustReadOp(t, conns[5], opWelcome)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if _, n := s.hub.counts(); n != 6 {
			return fmt.Errorf("connections %d, want 6", n)
		}
		return nil
	})
	n := danmaku.Notice{ID: testkit.Uniq("all"), TS: 7, Content: "maintenance at 3:00"}
	p := danmaku.NoticePush{Op: danmaku.OpAll, Msgs: []danmaku.Notice{n}}
	if got := pushNotices(t, s, p); got != 6 {
		t.Fatalf("delivered %d, want 6", got)
	}
	for i, ws := range conns {
		if got := readNotices(t, ws, danmaku.OpAll); len(got) != 1 || got[0].ID != n.ID || got[0].TS != 7 || got[0].Content != n.Content || got[0].Data != nil {
			t.Fatalf("connection %d got %+v", i, got)
		}
	}
	if got := pushNotices(t, s, p); got != 0 {
		t.Fatalf("redelivered broadcast handed out %d times, want 0", got)
	}
	for _, ws := range conns {
		expectNoFrame(t, ws, 100*time.Millisecond)
	}
	if v := value(t, s.metrics.notices.WithLabelValues(danmaku.OpAll)); v != 2 {
		t.Errorf("all notices counted %v, want 2", v)
	}
}

// Bad notice pushes are refused naming the field.
func TestNoticePushRejects(t *testing.T) {
	s, _ := mustStart(t, nil)
	p := push.NewClient(testSecret, 2*time.Second)
	for body, field := range map[string]string{
		`{"op":"user","users":[{"user":"a:b","msgs":[{"id":"x"}]}]}`:    "users[0].user",
		`{"op":"user","users":[{"user":"7","msgs":[{"content":"x"}]}]}`: "users[0].msgs[0].id",
		`{"op":"all","msgs":[{"id":"a"},{"content":"x"}]}`:              "msgs[1].id",
		`{"users":[],"op":"user","extra":1} {}`:                         "body",
	} {
		_, err := p.Push(context.Background(), s.AdvertiseAddr(), []byte(body))
		if danmaku.ErrorCode(err) != danmaku.EINVALID || danmaku.ErrorField(err) != field {
			t.Errorf("push %s: %v, want invalid_argument on %s", body, err, field)
		}
	}
}

// The notice memory drops its oldest ids first.
func TestNoticeMemory(t *testing.T) {
	var seen noticeSeen
	batch := func(from, to int) []danmaku.Notice {
		var out []danmaku.Notice
		for i := from; i < to; i++ {
			out = append(out, danmaku.Notice{ID: strconv.Itoa(i)})
		}
		return out
	}
	if got := seen.fresh(batch(0, noticeMemory)); len(got) != noticeMemory {
		t.Fatalf("first pass kept %d", len(got))
	}
	if got := seen.fresh(batch(noticeMemory-1, noticeMemory+1)); len(got) != 1 || got[0].ID != strconv.Itoa(noticeMemory) {
		t.Fatalf("overlap kept %v", noticeIDs(got))
	}
	if got := seen.fresh(batch(1, 2)); len(got) != 0 {
		t.Fatalf("id 1 is still remembered, kept %v", noticeIDs(got))
	}
	if got := seen.fresh(batch(0, 1)); len(got) != 1 {
		t.Fatalf("id 0 was evicted first and is new again, kept %v", noticeIDs(got))
	}
}
