package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

const modesAdminSecret = "modes-admin-secret"

// modesStack is a stack of two comets, one job and two logics (the
// stack's and one more on the same Redis and Kafka), with the admin API on.
type modesStack struct {
	*stack.Stack
	logics []string // base URLs of both logics
}

func newModesStack(t *testing.T, logic ...string) *modesStack {
	t.Helper()
	s := stack.New(t, stack.Options{Logic: append([]string{"-logic.admin_secret", modesAdminSecret}, logic...)})
	var addr string
	stack.Serve(t, "logic", nil, func() []string {
		addr = testkit.FreeAddr(t)
		return append([]string{"-config", "configs/logic.yaml", "-redis.addrs", s.RedisAddrs(), "-kafka.brokers", s.Kafka,
			"-logic.listen", addr, "-logic.admin_secret", modesAdminSecret,
			"-logic.rate_limit", "100000", "-logic.rate_burst", "100000", "-logic.ip_rate_limit", "0"}, logic...)
	}, func() string { return "http://" + addr + "/readyz" })
	return &modesStack{Stack: s, logics: []string{s.LogicURL, "http://" + addr}}
}

// admin posts body to the admin route path of logic base and decodes the
// 200 answer into out.
func modesAdmin(t *testing.T, base, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+modesAdminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s %s: %d %s", path, body, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

// logicState is GET /logic/room of logic base.
func logicState(base, room string) (danmaku.RoomState, error) {
	var r struct{ State danmaku.RoomState }
	resp, err := http.Get(base + "/logic/room?roomId=" + room)
	if err != nil {
		return r.State, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r.State, fmt.Errorf("GET /logic/room: %d", resp.StatusCode)
	}
	return r.State, json.NewDecoder(resp.Body).Decode(&r)
}

// A room settings change made through one logic holds on the other logic
// and reaches viewers of both comets as a state frame within a second;
// a viewer joining afterwards gets the settings in its welcome; a change
// naming one mode keeps the others.
func TestRoomStateReachesEveryProcess(t *testing.T) {
	s := newModesStack(t)
	room := testkit.Uniq("modes_")
	views := []*wsviewer.Viewer{s.Viewer(t, room, s.Comets[0]), s.Viewer(t, room, s.Comets[1])}
	for _, v := range views {
		if w := v.Welcomes()[0]; w.State != nil {
			t.Fatalf("welcome of a room never set carries a state: %+v", *w.State)
		}
	}
	// Both logics have read the room (the settings of a room being sent
	// to are cached): the change must replace what they hold.
	for _, base := range s.logics {
		if st, err := logicState(base, room); err != nil || st.Ver != 0 {
			t.Fatalf("%s before: %+v %v", base, st, err)
		}
	}
	for round, body := range []string{`"slowSeconds":30,"membersOnly":true`, `"uniqueSeconds":60`} {
		var resp struct{ State danmaku.RoomState }
		began := time.Now()
		modesAdmin(t, s.logics[0], "/logic/admin/room", `{"roomId":"`+room+`",`+body+`}`, &resp)
		want := danmaku.RoomState{Ver: int64(round + 1), SlowSeconds: 30, MembersOnly: true}
		if round == 1 {
			want.UniqueSeconds = 60
		}
		if resp.State != want {
			t.Fatalf("answer %+v, want %+v", resp.State, want)
		}
		took := map[string]time.Duration{}
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			for i, v := range views {
				name := fmt.Sprintf("viewer of comet %d", i)
				if _, ok := took[name]; ok {
					continue
				}
				if st := v.States(); len(st) == round+1 && st[round].State == want {
					took[name] = st[round].At.Sub(began)
				} else if len(st) > round+1 {
					return fmt.Errorf("%s got %d state frames: %+v", name, len(st), st)
				}
			}
			name := "logic 2"
			if _, ok := took[name]; !ok {
				if st, err := logicState(s.logics[1], room); err == nil && st == want {
					took[name] = time.Since(began)
				}
			}
			if len(took) < 3 {
				return fmt.Errorf("reached %v so far", took)
			}
			return nil
		})
		for who, d := range took {
			if d > time.Second {
				t.Errorf("round %d: %s had the settings after %v, over a second", round, who, d)
			}
		}
		t.Logf("round %d: settings reached %v", round, took)
		late := wsviewer.Once(t, s.Comets[round].WS(), room, nil)
		late.WaitWelcomes(t, 1, 5*time.Second)
		if w := late.Welcomes()[0]; w.State == nil || *w.State != want {
			t.Fatalf("welcome after the change: %+v, want %+v", w.State, want)
		}
	}
}

// arrived reports whether v received a message with id, live or replayed.
func arrived(v *wsviewer.Viewer, id string) bool {
	for _, a := range v.Arrivals() {
		if a.Msg.ID == id {
			return true
		}
	}
	return false
}

// historyHas reports whether GET /logic/history of room holds id.
func historyHas(t *testing.T, base, room, id string) bool {
	t.Helper()
	var h danmaku.HistoryResponse
	if err := json.Unmarshal(stack.GetOK(t, base+"/logic/history?roomId="+room), &h); err != nil {
		t.Fatal(err)
	}
	for _, m := range h.Messages {
		if m.ID == id {
			return true
		}
	}
	return false
}

// A hidden user's messages reach the user's own tabs, on every comet, and
// no other viewer: not live, not after a resume, not in the history on
// join nor in GET /logic/history, whichever logic the user sends through;
// the user's sends are answered as any other. After unhide the user's
// next messages reach everybody.
func TestShadowHide(t *testing.T) {
	s := newModesStack(t)
	room := testkit.Uniq("shadow_")
	const hidden, other = 777001, 777002
	uid := func(u int) url.Values { return url.Values{"uid": {fmt.Sprint(u)}} }
	tabs := []*wsviewer.Viewer{wsviewer.Once(t, s.Comets[0].WS(), room, uid(hidden)), wsviewer.Once(t, s.Comets[1].WS(), room, uid(hidden))}
	others := []*wsviewer.Viewer{s.Viewer(t, room, s.Comets[0]), s.Viewer(t, room, s.Comets[1]), wsviewer.Once(t, s.Comets[1].WS(), room, uid(other))}
	modesAdmin(t, s.logics[0], "/logic/admin/hide", fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"1h","actor":"mod"}`, hidden, room), nil)
	time.Sleep(700 * time.Millisecond) // the other logic reads the room again

	var secret []string
	for i, base := range s.logics {
		ids, err := stack.Post(base, room, hidden, "spammer", []string{fmt.Sprint("buy followers ", i)})
		if err != nil {
			t.Fatalf("the hidden user's send through logic %d: %v", i, err)
		}
		secret = append(secret, ids...)
	}
	visible, err := stack.Post(s.LogicURL, room, other, "fan", []string{"nice stream"})
	if err != nil {
		t.Fatal(err)
	}
	wsviewer.DeliveredOnce(t, 10*time.Second, append(append([]string{}, secret...), visible...), tabs...)
	wsviewer.DeliveredOnce(t, 10*time.Second, visible, others...)
	check := func(when string, vs ...*wsviewer.Viewer) {
		t.Helper()
		for i, v := range vs {
			for _, id := range secret {
				if arrived(v, id) {
					t.Fatalf("%s: viewer %d got the hidden message %s", when, i, id)
				}
			}
		}
		for _, id := range secret {
			if historyHas(t, s.LogicURL, room, id) {
				t.Fatalf("%s: GET /logic/history returns the hidden message %s", when, id)
			}
		}
	}
	check("live", others...)
	for _, v := range others[:2] {
		v.Drop()
		v.Resume(t)
	}
	fresh := []*wsviewer.Viewer{s.Viewer(t, room, s.Comets[0]), s.Viewer(t, room, s.Comets[1])}
	wsviewer.Delivered(t, 10*time.Second, visible, fresh...)
	check("after a resume and a join", append(others, fresh...)...)

	modesAdmin(t, s.logics[0], "/logic/admin/unhide", fmt.Sprintf(`{"userId":%d,"roomId":"%s"}`, hidden, room), nil)
	time.Sleep(700 * time.Millisecond)
	after, err := stack.Post(s.logics[1], room, hidden, "spammer", []string{"sorry"})
	if err != nil {
		t.Fatal(err)
	}
	wsviewer.DeliveredOnce(t, 10*time.Second, after, append(tabs, others...)...)
	check("after unhide", others...)
}

// pinsOf waits until v got n pin or unpin frames and returns them.
func pinsOf(t *testing.T, v *wsviewer.Viewer, n int) []wsviewer.PinSeen {
	t.Helper()
	var got []wsviewer.PinSeen
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if got = v.Pins(); len(got) < n {
			return fmt.Errorf("%d pin frames so far: %+v", len(got), got)
		}
		return nil
	})
	if len(got) != n {
		t.Fatalf("%d pin frames, want %d: %+v", len(got), n, got)
	}
	return got
}

// A message pinned to a room reaches the viewers of every comet as a pin
// frame and is in the welcome of later joins while it lasts; a text with
// an amount and no duration is pinned for the time its amount buys and
// replaces it; an unpin of another id changes nothing, an unpin of the
// pin reaches every viewer and takes it out of welcomes; a pin ends by
// itself.
func TestPins(t *testing.T) {
	s := newModesStack(t)
	room := testkit.Uniq("pins_")
	views := []*wsviewer.Viewer{s.Viewer(t, room, s.Comets[0]), s.Viewer(t, room, s.Comets[1])}
	ids, err := stack.Post(s.LogicURL, room, 555, "ann", []string{"first!"})
	if err != nil {
		t.Fatal(err)
	}
	wsviewer.DeliveredOnce(t, 10*time.Second, ids, views...)
	var resp danmaku.AdminResponse
	modesAdmin(t, s.logics[1], "/logic/admin/pin", `{"roomId":"`+room+`","ids":["`+ids[0]+`"],"duration":"1m"}`, &resp)
	if p := resp.Pin; p == nil || p.ID != ids[0] || p.Content != "first!" || p.Name != "ann" || p.UID != 555 || p.Ver < 1 {
		t.Fatalf("pin answer %+v", resp)
	}
	for _, v := range views {
		if got := pinsOf(t, v, 1); got[0].Op != "pin" || got[0].Pin != *resp.Pin {
			t.Fatalf("pin frame %+v, want %+v", got[0], *resp.Pin)
		}
	}
	welcomePin := func(c *stack.Comet) *danmaku.Pin {
		t.Helper()
		v := wsviewer.Once(t, c.WS(), room, nil)
		defer v.Close()
		return v.Welcomes()[0].Pin
	}
	if p := welcomePin(s.Comets[1]); p == nil || *p != *resp.Pin {
		t.Fatalf("welcome pin %+v, want %+v", p, resp.Pin)
	}
	began := time.Now()
	resp = danmaku.AdminResponse{}
	modesAdmin(t, s.logics[0], "/logic/admin/pin", `{"roomId":"`+room+`","content":"Thanks for the gift!","amount":3000}`, &resp)
	paid := *resp.Pin
	if d := time.UnixMilli(paid.Until).Sub(began); paid.Amount != 3000 || d < 290*time.Second || d > 301*time.Second {
		t.Fatalf("paid pin %+v lasts %v, want 300 s", paid, d)
	}
	resp = danmaku.AdminResponse{}
	modesAdmin(t, s.logics[0], "/logic/admin/unpin", `{"roomId":"`+room+`","ids":["`+ids[0]+`"]}`, &resp)
	if resp.Removed == nil || *resp.Removed {
		t.Fatalf("unpin of the replaced pin: %+v", resp)
	}
	modesAdmin(t, s.logics[1], "/logic/admin/unpin", `{"roomId":"`+room+`","ids":["`+paid.ID+`"]}`, &resp)
	for _, v := range views {
		got := pinsOf(t, v, 3)
		if got[1].Op != "pin" || got[1].Pin != paid || got[2].Op != "unpin" || got[2].Pin.ID != paid.ID {
			t.Fatalf("pin frames %+v", got)
		}
	}
	if p := welcomePin(s.Comets[0]); p != nil {
		t.Fatalf("welcome after unpin has %+v", p)
	}
	modesAdmin(t, s.logics[0], "/logic/admin/pin", `{"roomId":"`+room+`","content":"short","duration":"1s"}`, nil)
	pinsOf(t, views[0], 4)
	time.Sleep(1100 * time.Millisecond)
	if p := welcomePin(s.Comets[0]); p != nil {
		t.Fatalf("welcome after the pin ended has %+v", p)
	}
}
