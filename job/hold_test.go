package job_test

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
	"github.com/danmaku/danmaku/internal/testkit"
)

// admin posts body to the harness logic's admin route path with the admin
// secret and decodes the answer into out (may be nil); it fails the test
// unless the status is want.
func (e *env) admin(path, body string, want int, out any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.logic.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		e.t.Fatalf("%s %s: status %d, want %d", path, body, resp.StatusCode, want)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			e.t.Fatalf("%s: %v", path, err)
		}
	}
}

// shown lists the ids of the messages v got, in order (del frames left out).
func (v *viewer) shown() []string {
	msgs, _ := v.received()
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// A room's delay holds non-moderators' messages in job until their time,
// then gives them positions; a high-priority message (the admin send) is
// not held and goes first; a held message deleted within its hold never
// reaches a viewer nor the history.
func TestDelayHoldsMessages(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	j := e.startJob(jobConfig(), nil)
	const hold = 2 * time.Second
	e.admin("/logic/admin/room", `{"roomId":"`+room+`","delaySeconds":2}`, http.StatusOK, nil)
	start := time.Now()
	held := e.send(room, 5, "a1", "a2", "a3")
	var paid struct {
		MsgIDs []string `json:"msgIds"`
	}
	e.admin("/logic/admin/send", `{"roomId":"`+room+`","userId":9,"userName":"mod","priority":1,"messages":[{"content":"paid"}]}`,
		http.StatusAccepted, &paid)
	e.admin("/logic/admin/delete", `{"roomId":"`+room+`","ids":["`+held[1]+`"]}`, http.StatusOK, nil)

	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		for _, v := range viewers {
			if got := v.shown(); len(got) == 0 {
				return fmt.Errorf("nothing yet")
			}
		}
		return nil
	})
	if since := time.Since(start); since < hold {
		for _, v := range viewers {
			if got := v.shown(); !slices.Equal(got, paid.MsgIDs) {
				t.Fatalf("%v after the sends: %v, want the high-priority message alone", since, got)
			}
		}
	} else {
		t.Logf("the machine is slow: the first message came %v after the sends; order checked below", since)
	}
	want := []string{paid.MsgIDs[0], held[0], held[2]}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		for _, v := range viewers {
			if got := v.shown(); len(got) < len(want) {
				return fmt.Errorf("shown %v", got)
			}
		}
		return nil
	})
	if since := time.Since(start); since < hold {
		t.Fatalf("the held messages came %v after their send, before their %v hold", since, hold)
	}
	time.Sleep(300 * time.Millisecond)
	for _, v := range viewers {
		e.checkTimeline(v, 0, want, v.messages()[0].Epoch, 1)
	}
	if n := counter(t, j.reg, "danmaku_job_dropped_total", "reason", "deleted"); n != 1 {
		t.Errorf("deleted while held: %v, want 1", n)
	}
	if n := counter(t, j.reg, "danmaku_job_held_total"); n != 3 {
		t.Errorf("held: %v, want 3", n)
	}
}

// A job killed while it holds messages commits nothing past them: the
// next member holds them again for what is left of their hold and
// delivers each once, in order; one deleted while held before the crash,
// and one marked deleted by a delete whose event never reached Kafka,
// never reach a viewer, though their hold has passed when the next member
// reads them.
func TestHeldMessagesSurviveACrash(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	cfg := jobConfig()
	a := e.startJob(cfg, nil)
	e.admin("/logic/admin/room", `{"roomId":"`+room+`","delaySeconds":3}`, http.StatusOK, nil)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if n, err := e.committed(); err != nil || n != 1 {
			return fmt.Errorf("committed %d (%v), want the state event's 1", n, err)
		}
		return nil
	})
	start := time.Now()
	ids := e.send(room, 5, "h1", "h2", "h3", "h4", "h5")
	e.admin("/logic/admin/delete", `{"roomId":"`+room+`","ids":["`+ids[1]+`"]}`, http.StatusOK, nil)
	if err := e.store.MarkDeleted(context.Background(), room, ids[3:4], time.Hour); err != nil {
		t.Fatal(err)
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if n := counter(t, a.reg, "danmaku_job_dropped_total", "reason", "deleted"); n != 1 {
			return fmt.Errorf("deleted while held: %v", n)
		}
		return nil
	})
	time.Sleep(3 * cfg.CommitInterval)
	if n, err := e.committed(); err != nil || n != 1 {
		t.Fatalf("committed %d (%v) while the messages are held, want 1", n, err)
	}
	a.Crash()
	<-a.Done()
	if since := time.Since(start); since >= 3*time.Second {
		t.Fatalf("the crash came %v after the sends, after the hold: the test proves nothing", since)
	}
	for _, v := range viewers {
		if got := v.shown(); len(got) > 0 {
			t.Fatalf("shown before the crash: %v", got)
		}
	}
	time.Sleep(time.Until(start.Add(3200 * time.Millisecond)))
	e.startJob(cfg, nil)
	want := []string{ids[0], ids[2], ids[4]}
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		for _, v := range viewers {
			if got := v.shown(); len(got) < len(want) {
				return fmt.Errorf("shown %v", got)
			}
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	for _, v := range viewers {
		e.checkTimeline(v, 0, want, v.messages()[0].Epoch, 1)
	}
}

// A comet whose last viewer of a room left is not pushed the room's
// events any more: a viewer that joins there after a settings change gets
// the new settings in its welcome, however soon after the comet's last
// state event it joins.
func TestStateAfterTheRoomWasEmpty(t *testing.T) {
	e := newEnv(t, 2)
	room := testkit.Uniq("room")
	stay := e.viewer(e.comets[0], room)
	gone := e.viewer(e.comets[1], room)
	e.waitOnline(room, 2)
	e.startJob(jobConfig(), nil)
	stateVer := func(v *viewer, ver int64) {
		t.Helper()
		testkit.SucceedsSoon(t, 10*time.Second, func() error {
			for _, s := range v.States() {
				if s.State.Ver == ver {
					return nil
				}
			}
			return fmt.Errorf("no state of version %d: %+v", ver, v.States())
		})
	}
	e.admin("/logic/admin/room", `{"roomId":"`+room+`","slowSeconds":1}`, http.StatusOK, nil)
	stateVer(gone, 1)
	gone.Close()
	e.waitOnline(room, 1)
	e.admin("/logic/admin/room", `{"roomId":"`+room+`","slowSeconds":2}`, http.StatusOK, nil)
	stateVer(stay, 2)
	joined := e.viewer(e.comets[1], room)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if len(joined.Welcomes()) == 0 {
			return fmt.Errorf("no welcome")
		}
		return nil
	})
	if w := joined.Welcomes()[0]; w.State == nil || w.State.Ver != 2 || w.State.SlowSeconds != 2 {
		t.Fatalf("welcome on the comet the room had left: state %+v, want version 2", w.State)
	}
}

// heldList reads room's held comments from the harness logic.
func (e *env) heldList(room string) []danmaku.HeldItem {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.logic.URL+"/logic/admin/held?roomId="+room, nil)
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out danmaku.HeldResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		e.t.Fatalf("held: status %d", resp.StatusCode)
	}
	return out.Items
}

// heldIDs are the ids of items.
func heldIDs(items []danmaku.HeldItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// Moderators see what a room's delay holds: GET /logic/admin/held lists
// each held comment with its release time, soonest first, from the moment
// job holds it until its release; one deleted there leaves the list at
// once, stays off it when a job killed meanwhile is followed by another
// that holds the comments again, and never reaches a viewer; the list is
// empty once the others are released.
func TestHeldListed(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	cfg := jobConfig()
	a := e.startJob(cfg, nil)
	e.admin("/logic/admin/room", `{"roomId":"`+room+`","delaySeconds":4}`, http.StatusOK, nil)
	ids := e.send(room, 5, "h1", "h2", "h3")
	var items []danmaku.HeldItem
	testkit.SucceedsSoon(t, 2*time.Second, func() error {
		if items = e.heldList(room); !slices.Equal(heldIDs(items), ids) {
			return fmt.Errorf("held %v, want %v", heldIDs(items), ids)
		}
		return nil
	})
	if it := items[1]; it.Content != "h2" || it.UID != 5 || it.ReleaseAt != it.TS+4000 {
		t.Fatalf("held item %+v", it)
	}
	e.admin("/logic/admin/delete", `{"roomId":"`+room+`","ids":["`+ids[1]+`"]}`, http.StatusOK, nil)
	want := []string{ids[0], ids[2]}
	if got := heldIDs(e.heldList(room)); !slices.Equal(got, want) {
		t.Fatalf("held after the delete %v, want %v", got, want)
	}
	a.Crash()
	<-a.Done()
	e.startJob(cfg, nil)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if n, err := e.committed(); err != nil || n < 1 {
			return fmt.Errorf("committed %d (%v)", n, err)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	if got := heldIDs(e.heldList(room)); !slices.Equal(got, want) {
		t.Fatalf("held after the next job read them again %v, want %v", got, want)
	}
	waitShown(t, viewers, want)
	if got := e.heldList(room); len(got) != 0 {
		t.Fatalf("held after the release %+v", got)
	}
}
