package e2e_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// A job killed with SIGKILL while it holds a room's delayed comments and
// delivers approved ones: the job started again in its place delivers
// every held comment once, after its delay, in the order they were sent,
// and every approved one once; the held comment a moderator deleted before
// the kill never reaches a viewer; no viewer of either comet sees a gap.
func TestFaultJobKilledHeldAndReviewed(t *testing.T) {
	s := newModesStack(t)
	base := s.logics[1]
	room := testkit.Uniq("heldkill_")
	var vs []*wsviewer.Viewer
	for i := 0; i < 4; i++ {
		vs = append(vs, s.Viewer(t, room, s.Comets[i%2]))
	}
	modesAdmin(t, base, "/logic/admin/words/add", `{"roomId":"`+room+`","words":["heldkillword"],"mode":"review"}`, nil)
	modesAdmin(t, base, "/logic/admin/room", `{"roomId":"`+room+`","delaySeconds":6}`, nil)
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		for i, v := range vs {
			if len(v.States()) == 0 {
				return fmt.Errorf("viewer %d has no state frame", i)
			}
		}
		return nil
	})
	time.Sleep(time.Second) // the logics' view of the room (500 ms) holds the delay

	began := time.Now()
	var held, reviewed []string
	for i := 0; i < 20; i++ {
		ids, err := stack.Post(base, room, int64(9500+i), "held", []string{fmt.Sprintf("held %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ids...)
		ids, err = stack.Post(base, room, int64(9600+i), "reviewed", []string{fmt.Sprintf("heldkillword %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		reviewed = append(reviewed, ids...)
	}
	var del, approved danmaku.AdminResponse
	modesAdmin(t, base, "/logic/admin/delete", `{"roomId":"`+room+`","ids":["`+held[7]+`"]}`, &del)
	for i := 0; i < len(reviewed); i += 10 {
		modesAdmin(t, base, "/logic/admin/review/approve", fmt.Sprintf(`{"roomId":%q,"ids":%s}`, room, jsonList(reviewed[i:i+10])), &approved)
		if approved.Approved == nil || *approved.Approved != 10 {
			t.Fatalf("approved %+v, want 10", approved.Approved)
		}
	}
	s.Jobs[0].Kill()
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("the kill came %v after the first send, after its 6 s delay: the test proves nothing", d)
	}
	for i, v := range vs {
		for _, sh := range v.Shown() {
			if slices.Contains(held, sh.ID) {
				t.Fatalf("viewer %d was shown held comment %s before the kill", i, sh.ID)
			}
		}
	}
	s.Jobs[0].Restart(t)
	kept := slices.Delete(slices.Clone(held), 7, 8)
	wsviewer.DeliveredOnce(t, 60*time.Second, append(slices.Clone(kept), reviewed...), vs...)
	time.Sleep(time.Second)
	wsviewer.NoGaps(t, vs...)
	for i, v := range vs {
		var order []string
		for _, sh := range v.Shown() {
			if sh.ID == held[7] {
				t.Fatalf("viewer %d was shown the deleted held comment", i)
			}
			if slices.Contains(held, sh.ID) {
				order = append(order, sh.ID)
				if sh.At.Before(began.Add(6 * time.Second)) {
					t.Fatalf("viewer %d: held comment %s shown %v after the first send, before its delay", i, sh.ID, sh.At.Sub(began))
				}
			}
		}
		if !slices.Equal(order, kept) {
			t.Fatalf("viewer %d: held comments in the order %v, want %v", i, order, kept)
		}
	}
}

// jsonList is ids as a JSON array.
func jsonList(ids []string) string {
	b := []byte{'['}
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%q", id)
	}
	return string(append(b, ']'))
}
