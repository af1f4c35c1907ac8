package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

const noticeAdminSecret = "stack-admin-secret-0123"

// noticeTab is a viewer connection of a user that records the ids of the
// user frames it receives.
type noticeTab struct {
	mu  sync.Mutex
	ids []string
}

func dialNoticeTab(t *testing.T, keys *tokens.Keys, c *stack.Comet, uid, room string) *noticeTab {
	t.Helper()
	n, err := strconv.ParseInt(uid, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := wsviewer.TryDial(c.WS()+"?room="+room+"&token="+keys.Token(t, n, "", nil), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	tb := &noticeTab{}
	go func() {
		for {
			f, _, err := ws.Next(time.Hour)
			if err != nil {
				return
			}
			if f.Op != danmaku.OpUser {
				continue
			}
			tb.mu.Lock()
			for _, m := range f.Notices.Msgs {
				tb.ids = append(tb.ids, m.ID)
			}
			tb.mu.Unlock()
		}
	}()
	return tb
}

func (tb *noticeTab) count() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return len(tb.ids)
}

// exactly reports whether the tab got every id of want once and nothing
// else.
func (tb *noticeTab) exactly(want []string) error {
	tb.mu.Lock()
	got := slices.Clone(tb.ids)
	tb.mu.Unlock()
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		return fmt.Errorf("got %d notices, want %d", len(got), len(w))
	}
	return nil
}

// pushToUser posts n notices to uid through logic's admin API and returns
// their ids.
func pushToUser(s *stack.Stack, uid string, n int) ([]string, error) {
	var msgs []string
	for i := 0; i < n; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"content":"notice %d"}`, i))
	}
	req, _ := http.NewRequest(http.MethodPost, s.LogicURL+"/logic/push/user",
		strings.NewReader(`{"userId":`+uid+`,"messages":[`+strings.Join(msgs, ",")+`]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+noticeAdminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct{ MsgIDs []string }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &r) != nil {
		return nil, fmt.Errorf("push: %d %s", resp.StatusCode, b)
	}
	return r.MsgIDs, nil
}

// A job killed (SIGKILL) in the middle of a stream of notices to users
// loses none: the job started again in its place gets the partitions and
// delivers what the dead one had not committed, and every tab of every
// user (two per user, on both comets) ends with each of its user's
// notices exactly once.
func TestFaultJobKilledDuringNotices(t *testing.T) {
	keys := tokens.New(t) // the tabs prove their user with a token
	s := stack.New(t, stack.Options{Logic: []string{"-logic.admin_secret", noticeAdminSecret},
		Comet: []string{"-auth.hmac_secret", string(keys.Secret)}})
	users := []string{"51001", "51002", "51003", "51004"}
	var tabs []*noticeTab
	for i, u := range users {
		tabs = append(tabs, dialNoticeTab(t, keys, s.Comets[i%2], u, testkit.Uniq("n-")),
			dialNoticeTab(t, keys, s.Comets[(i+1)%2], u, testkit.Uniq("n-")))
	}
	// Both tabs of every user registered: a notice sent now reaches both.
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		for _, u := range users {
			if n := s.RDB().HLen(t.Context(), "user:online:{"+u+"}").Val(); n != 2 {
				return fmt.Errorf("user %s has %d connections registered", u, n)
			}
		}
		return nil
	})
	want := map[string][]string{}
	var mu sync.Mutex
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < 200; i++ {
			u := users[i%len(users)]
			ids, err := pushToUser(s, u, 5)
			if err != nil {
				sent <- err
				return
			}
			mu.Lock()
			want[u] = append(want[u], ids...)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
		sent <- nil
	}()
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if n := tabs[0].count(); n < 50 {
			return fmt.Errorf("%d notices delivered, waiting for 50", n)
		}
		return nil
	})
	s.Jobs[0].Kill()
	if n := tabs[0].count(); n >= 250 {
		t.Fatal("every notice was delivered before the kill; the test proves nothing")
	}
	s.Jobs[0].Restart(t)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	testkit.SucceedsSoon(t, 60*time.Second, func() error {
		for i, tb := range tabs {
			if err := tb.exactly(want[users[i/2]]); err != nil {
				return fmt.Errorf("tab %d of user %s: %w", i, users[i/2], err)
			}
		}
		return nil
	})
}
