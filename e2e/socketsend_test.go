package e2e_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// socketStack is a stack with two more comets that take send frames
// (comet.socket_send) with tight limits of their own and verify tokens of
// keys; job pushes to them like to the stack's own.
type socketStack struct {
	*stack.Stack
	keys   *tokens.Keys
	comets []string      // ws:// URLs of the comets that take sends
	procs  []*stack.Proc // their processes
}

// newSocketStack's limits and blocked word are logic's: the comets apply
// logic's rules of the send path (sendpath.Rules), which it writes to
// Redis.
func newSocketStack(t *testing.T) *socketStack {
	t.Helper()
	keys := tokens.New(t)
	s := &socketStack{Stack: stack.New(t, stack.Options{Comets: 1, Logic: []string{"-logic.admin_secret", modesAdminSecret,
		"-logic.rate_limit", "2", "-logic.rate_burst", "50", "-logic.ip_rate_limit", "0",
		"-logic.blocked_words.mode", "reject", "-logic.blocked_words.words", "badword"}}), keys: keys}
	for i := 0; i < 2; i++ {
		s.comets = append(s.comets, s.socketComet(t, s.Kafka, "-auth.hmac_secret", string(keys.Secret)))
	}
	return s
}

// socketComet starts a comet with comet.socket_send writing to kafka and
// returns its /ws URL.
func (s *socketStack) socketComet(t *testing.T, kafka string, flags ...string) string {
	t.Helper()
	var public string
	s.procs = append(s.procs, stack.Serve(t, "comet", nil, func() []string {
		public = testkit.FreeAddr(t)
		internal := testkit.FreeAddr(t)
		return append(append([]string{"-config", "configs/comet.yaml", "-redis.addrs", s.RedisAddrs(),
			"-kafka.brokers", kafka, "-comet.id", testkit.Uniq("sockcomet-"), "-comet.socket_send",
			"-comet.listen", public, "-comet.internal_listen", internal, "-comet.advertise", internal},
			stack.CometFlags()...), flags...)
	}, func() string { return "http://" + public + "/healthz" }))
	return "ws://" + public + "/ws"
}

// viewer is a viewer of room on the socket comet i.
func (s *socketStack) viewer(t *testing.T, i int, room string) *wsviewer.Viewer {
	t.Helper()
	v := wsviewer.DialAsync(t, room, s.comets[i])
	v.WaitWelcomes(t, 1, 15*time.Second)
	return v
}

// dial opens a socket to comet i with query (token, uid) and reads its
// welcome of room.
func (s *socketStack) dial(t *testing.T, i int, room string, query url.Values) *wsviewer.Conn {
	t.Helper()
	query.Set("room", room)
	c := wsviewer.DialConn(t, s.comets[i]+"?"+query.Encode(), nil)
	t.Cleanup(c.Close)
	w := c.NextOp(t, danmaku.OpWelcome, 10*time.Second)
	if !w.Welcome.Send {
		t.Fatalf("welcome without send: %+v", w.Welcome)
	}
	return c
}

func (s *socketStack) tokenConn(t *testing.T, i int, room string, uid int64, rooms []string) *wsviewer.Conn {
	t.Helper()
	return s.dial(t, i, room, url.Values{"token": {s.keys.Token(t, uid, "user"+strconv.FormatInt(uid, 10), rooms)}})
}

// send writes a send frame and returns its answer: an ack or an error
// frame with the same ref.
func send(t *testing.T, c *wsviewer.Conn, room string, ref int64, msgs ...danmaku.SendMessage) danmaku.ServerFrame {
	t.Helper()
	c.MustSend(t, danmaku.ClientFrame{Op: danmaku.OpSend, Room: room, Msgs: msgs, Ref: ref})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f := c.MustNext(t, time.Until(deadline))
		switch {
		case f.Ack != nil && f.Ack.Ref == ref:
			return f
		case f.Error != nil && f.Error.Ref == ref:
			return f
		}
	}
	t.Fatalf("no answer to send %d", ref)
	return danmaku.ServerFrame{}
}

func msg(content, id string) danmaku.SendMessage {
	return danmaku.SendMessage{Content: content, MsgID: id}
}

// refused fails t unless f is an error frame of code naming field.
func refused(t *testing.T, f danmaku.ServerFrame, code, field string) *danmaku.ErrorFrame {
	t.Helper()
	if f.Error == nil || f.Error.Code != code || f.Error.Field != field {
		t.Fatalf("answer %+v %+v, want error %s on %q", f.Ack, f.Error, code, field)
	}
	return f.Error
}

// Comments sent over sockets of two comets reach every viewer of those
// comets and of a comet that takes no sends exactly once; a retried msgId (over the socket again, then over
// HTTP) gets the same id and is shown once.
func TestSocketSendDelivery(t *testing.T) {
	s := newSocketStack(t)
	room := testkit.Uniq("sock_")
	vs := []*wsviewer.Viewer{s.viewer(t, 0, room), s.viewer(t, 1, room), s.Viewer(t, room, s.Comets[0])}
	senders := []*wsviewer.Conn{s.tokenConn(t, 0, room, 9101, nil), s.tokenConn(t, 1, room, 9102, nil)}
	var ids []string
	for i := 0; i < 40; i++ {
		f := send(t, senders[i%2], room, int64(i+1), msg(fmt.Sprintf("socket %d", i), fmt.Sprintf("k%d", i)))
		if f.Ack == nil || len(f.Ack.IDs) != 1 {
			t.Fatalf("send %d: %+v", i, f.Error)
		}
		ids = append(ids, f.Ack.IDs[0])
	}
	// The same msgId again, over the socket and over HTTP with the same
	// user's token: the same id, nothing shown twice.
	again := send(t, senders[0], room, 100, msg("socket 0", "k0"))
	if again.Ack == nil || again.Ack.IDs[0] != ids[0] || ids[0] != "u9101-k0" {
		t.Fatalf("retry over the socket: %+v %+v, want id %s", again.Ack, again.Error, ids[0])
	}
	body := `{"roomId":"` + room + `","messages":[{"content":"socket 0","msgId":"k0"}]}`
	req, _ := http.NewRequest(http.MethodPost, s.LogicURL+"/logic/send", bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wsviewer.DeliveredOnce(t, 15*time.Second, ids, vs...)
	time.Sleep(2 * stack.Window)
	for i, v := range vs {
		if n := len(v.Shown()); n != len(ids) {
			t.Fatalf("viewer %d shows %d messages, want %d", i, n, len(ids))
		}
	}
}

// Every refusal of the send path reaches a socket sender as an error frame
// with the send's ref, the HTTP code and the field in the frame's terms.
func TestSocketSendRefusals(t *testing.T) {
	s := newSocketStack(t)
	room := testkit.Uniq("sockno_")
	c := s.tokenConn(t, 0, room, 9201, []string{room, "other"})
	t.Run("invalid", func(t *testing.T) {
		refused(t, send(t, c, room, 1, msg("\u200b", "")), danmaku.EINVALID, "msgs[0].content")
		refused(t, send(t, c, room, 2), danmaku.EINVALID, "msgs")
		refused(t, send(t, c, "bad room", 3, msg("x", "")), danmaku.CodeForbidden, "room")
	})
	t.Run("identity", func(t *testing.T) {
		anon := s.dial(t, 0, room, url.Values{"uid": {"ann"}})
		refused(t, send(t, anon, room, 1, msg("x", "")), danmaku.EINVALID, "uid")
		byUID := s.dial(t, 1, room, url.Values{"uid": {"9202"}})
		if f := send(t, byUID, room, 2, msg("from a uid", "u")); f.Ack == nil || f.Ack.IDs[0] != "u9202-u" {
			t.Fatalf("send of uid 9202 with auth off: %+v %+v", f.Ack, f.Error)
		}
	})
	t.Run("forbidden room", func(t *testing.T) {
		refused(t, send(t, c, testkit.Uniq("elsewhere_"), 1, msg("x", "")), danmaku.CodeForbidden, "room")
	})
	t.Run("priority", func(t *testing.T) {
		c.MustSend(t, danmaku.ClientFrame{Op: danmaku.OpSend, Room: room, Msgs: []danmaku.SendMessage{msg("me first", "")}, Ref: 7, Priority: danmaku.PriorityHigh})
		f := c.NextOp(t, danmaku.OpError, 10*time.Second)
		if f.Error.Ref != 7 || f.Error.Code != danmaku.CodePriorityDenied || f.Error.Field != "priority" {
			t.Fatalf("high priority without the role: %+v", f.Error)
		}
	})
	t.Run("blocked", func(t *testing.T) {
		refused(t, send(t, c, room, 1, msg("a badword here", "")), danmaku.CodeBlocked, "msgs[0].content")
	})
	t.Run("rate limited", func(t *testing.T) {
		r := s.tokenConn(t, 0, room, 9203, nil)
		full := make([]danmaku.SendMessage, 50)
		for i := range full {
			full[i] = msg("burst "+strconv.Itoa(i), "")
		}
		if f := send(t, r, room, 1, full...); f.Ack == nil || len(f.Ack.IDs) != 50 {
			t.Fatalf("a full burst: %+v", f.Error)
		}
		if e := refused(t, send(t, r, room, 2, msg("one more", "")), danmaku.ERATELIMIT, "uid"); e.RetryAfterMs < 1000 {
			t.Fatalf("retryAfterMs %d, want at least 1000", e.RetryAfterMs)
		}
	})
	t.Run("muted", func(t *testing.T) {
		m := s.tokenConn(t, 1, room, 9204, nil)
		modesAdmin(t, s.LogicURL, "/logic/admin/mute", `{"userId":9204,"roomId":"`+room+`","duration":"1m"}`, nil)
		refused(t, send(t, m, room, 1, msg("x", "")), danmaku.CodeMuted, "uid")
	})
	t.Run("banned", func(t *testing.T) {
		b := s.tokenConn(t, 1, "other", 9205, nil)
		modesAdmin(t, s.LogicURL, "/logic/admin/ban", `{"userId":9205,"roomId":"`+room+`","duration":"1m"}`, nil)
		refused(t, send(t, b, room, 1, msg("x", "")), danmaku.CodeBanned, "room")
	})
	t.Run("room modes", func(t *testing.T) {
		modes := testkit.Uniq("sockmode_")
		m := s.tokenConn(t, 0, modes, 9206, nil)
		modesAdmin(t, s.LogicURL, "/logic/admin/room", `{"roomId":"`+modes+`","slowSeconds":60}`, nil)
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			if f := send(t, m, modes, 1, msg("first", "")); f.Error != nil && f.Error.Code != danmaku.CodeSlowMode {
				return fmt.Errorf("first send: %+v", f.Error)
			}
			f := send(t, m, modes, 2, msg("second", ""))
			if f.Error == nil || f.Error.Code != danmaku.CodeSlowMode {
				return fmt.Errorf("second send within the slow mode: %+v %+v", f.Ack, f.Error)
			}
			if f.Error.RetryAfterMs < 1000 {
				return fmt.Errorf("slow mode retryAfterMs %d", f.Error.RetryAfterMs)
			}
			return nil
		})
		modesAdmin(t, s.LogicURL, "/logic/admin/room", `{"roomId":"`+modes+`","slowSeconds":0,"membersOnly":true}`, nil)
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			f := send(t, m, modes, 3, msg("not a member", ""))
			if f.Error == nil || f.Error.Code != danmaku.CodeMembers || f.Error.Field != "room" {
				return fmt.Errorf("members-only: %+v %+v", f.Ack, f.Error)
			}
			return nil
		})
	})
	t.Run("unavailable", func(t *testing.T) {
		// A comet whose Kafka never answers: the send is refused within
		// the produce timeout, and nothing is acknowledged.
		dead := s.socketComet(t, testkit.FreeAddr(t), "-send.produce_timeout", "500ms")
		u := wsviewer.DialConn(t, dead+"?uid=9207&room="+room, nil)
		defer u.Close()
		u.NextOp(t, danmaku.OpWelcome, 10*time.Second)
		began := time.Now()
		refused(t, send(t, u, room, 1, msg("lost", "")), danmaku.EUNAVAILABLE, "")
		if took := time.Since(began); took > 3*time.Second {
			t.Fatalf("refused after %v, want about the produce timeout", took)
		}
	})
}

// A comet that takes sends over its sockets applies logic's rules of the
// send path, read from Redis, not its own send section: logic's blocked
// word and content bound are refused by a comet configured with neither.
// After the word list file of logic changed and logic and then the comet
// got SIGHUP, a newly blocked word is refused over the socket (the comet's
// periodic read of the rules is an hour away here).
func TestSocketSendFollowsLogicsRules(t *testing.T) {
	list := filepath.Join(t.TempDir(), "words.txt")
	if err := os.WriteFile(list, []byte("oldword\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &socketStack{Stack: stack.New(t, stack.Options{Comets: 1, Logic: []string{"-logic.blocked_words.mode", "reject",
		"-logic.blocked_words.file", list, "-logic.max_content_runes", "20"}})}
	s.comets = append(s.comets, s.socketComet(t, s.Kafka, "-send.rules_refresh", "1h"))
	room := testkit.Uniq("sockrules_")
	c := s.dial(t, 0, room, url.Values{"uid": {"9301"}})
	refused(t, send(t, c, room, 1, msg("an oldword here", "")), danmaku.CodeBlocked, "msgs[0].content")
	refused(t, send(t, c, room, 2, msg(strings.Repeat("x", 21), "")), danmaku.EINVALID, "msgs[0].content")
	if f := send(t, c, room, 3, msg("a newword here", "")); f.Ack == nil {
		t.Fatalf("newword before it was blocked: %+v", f.Error)
	}

	if err := os.WriteFile(list, []byte("oldword\nnewword\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Logic.Reload(t)
	ref := int64(10)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		s.procs[0].Reload(t)
		ref++
		f := send(t, c, room, ref, msg("a newword again", ""))
		if f.Error == nil || f.Error.Code != danmaku.CodeBlocked {
			return fmt.Errorf("newword after SIGHUP: %+v %+v", f.Ack, f.Error)
		}
		return nil
	})
}
