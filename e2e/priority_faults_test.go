package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

const prioAdminSecret = "stack-admin-secret-prio"

// sendHigh posts one high-priority message to room through the admin
// API's send and returns its id.
func sendHigh(s *stack.Stack, room string, i int) (string, error) {
	body := fmt.Sprintf(`{"roomId":%q,"userId":9,"userName":"sys","priority":1,"messages":[{"content":"paid %d","msgId":"paid-%d"}]}`, room, i, i)
	req, _ := http.NewRequest(http.MethodPost, s.LogicURL+"/logic/admin/send", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+prioAdminSecret)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r danmaku.SendResponse
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &r) != nil || len(r.MsgIDs) != 1 {
		return "", fmt.Errorf("admin send: %d %s", resp.StatusCode, b)
	}
	return r.MsgIDs[0], nil
}

// A job killed (SIGKILL) while a room receives normal messages and a
// stream of high-priority ones: the job started again in its place
// delivers what the dead one had not, and every viewer, on both comets,
// ends with every message of both lanes exactly once, in position order,
// the high-priority ones marked as such.
func TestFaultJobKilledHighPriority(t *testing.T) {
	s := stack.New(t, stack.Options{Logic: []string{"-logic.admin_secret", prioAdminSecret,
		"-logic.high_rate_limit", "100", "-logic.high_rate_burst", "100"}})
	room := testkit.Uniq("high-")
	var vs []*wsviewer.Viewer
	for i := 0; i < 4; i++ {
		vs = append(vs, s.Viewer(t, room, s.Comets[i%2]))
	}
	send := s.Send(t, room, 2000, 400)
	highIDs := make(chan []string, 1)
	go func() {
		var ids []string
		defer func() { highIDs <- ids }()
		for i := 0; i < 100; i++ {
			if id, err := sendHigh(s, room, i); err == nil {
				ids = append(ids, id)
			} else {
				t.Log(err)
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()
	testkit.SucceedsSoon(t, 15*time.Second, func() error { return firstShown(vs[0], 500) })
	s.Jobs[0].Kill()
	if n := len(vs[0].Shown()); n >= 2000 {
		t.Fatal("every message was delivered before the kill; the test proves nothing")
	}
	s.Jobs[0].Restart(t)
	send.Wait(t, 60*time.Second)
	high := <-highIDs
	if len(high) < 90 {
		t.Fatalf("only %d of 100 high-priority messages accepted", len(high))
	}
	wsviewer.DeliveredOnce(t, 60*time.Second, append(send.Accepted(), high...), vs...)
	wsviewer.NoGaps(t, vs...)
	isHigh := map[string]bool{}
	for _, id := range high {
		isHigh[id] = true
	}
	for i, v := range vs {
		for _, a := range v.Arrivals() {
			if a.Deleted == "" && a.Msg.Priority.High() != isHigh[a.Msg.ID] {
				t.Fatalf("viewer %d: message %s arrived with priority %v", i, a.Msg.ID, a.Msg.Priority)
			}
		}
	}
}
