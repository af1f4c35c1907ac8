package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
)

// TestFloor runs the bare send endpoint of scenario S4F: a valid request
// gets 202 with one id per message, a bad one 400, and the server stops
// when its context ends.
func TestFloor(t *testing.T) {
	addr := testkit.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runFloor(ctx, addr) }()
	c := &http.Client{Timeout: 5 * time.Second}
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		resp, err := c.Get("http://" + addr + "/logic/online?roomId=ready")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	post := func(body string) *http.Response {
		t.Helper()
		resp, err := c.Post("http://"+addr+"/logic/send", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("post: %v", err)
		}
		return resp
	}
	resp := post(`{"roomId":"r1","userId":7,"userName":"u","messages":[{"content":"a"},{"content":"b"}]}`)
	var got struct {
		MsgIDs []string `json:"msgIds"`
	}
	err := json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || err != nil || len(got.MsgIDs) != 2 || got.MsgIDs[0] == got.MsgIDs[1] {
		t.Fatalf("valid send: status %d, ids %v, decode %v; want 202 and two distinct ids", resp.StatusCode, got.MsgIDs, err)
	}
	for _, body := range []string{`{"roomId":"r1","messages":[]}`, `not json`} {
		resp := post(body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("body %q: status %d, want 400", body, resp.StatusCode)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("runFloor returned %d after its context ended, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runFloor did not return after its context ended")
	}
}
