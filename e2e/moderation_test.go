package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// wsFrame is a server frame (danmaku.ServerFrame) flattened for the
// checks.
type wsFrame struct {
	Op, Room, Code, Epoch string
	Pos                   int64
	RetryAfterMs          int64
	Recovered             *bool
	Replay                bool
	IDs                   []string
	Msgs                  []struct {
		ID  string
		Pos int64
	}
}

// flatFrame is f's fields in one wsFrame.
func flatFrame(f danmaku.ServerFrame) wsFrame {
	out := wsFrame{Op: f.Op}
	switch {
	case f.Welcome != nil:
		out.Room, out.Epoch, out.Pos, out.Recovered = f.Welcome.Room, f.Welcome.Epoch, f.Welcome.Pos, f.Welcome.Recovered
	case f.Msgs != nil:
		out.Room, out.Epoch, out.Replay = f.Msgs.Room, f.Msgs.Epoch, f.Msgs.Replay
		for _, m := range f.Msgs.Msgs {
			out.Msgs = append(out.Msgs, struct {
				ID  string
				Pos int64
			}{m.ID, m.Pos})
		}
	case f.Notices != nil:
		for _, n := range f.Notices.Msgs {
			out.Msgs = append(out.Msgs, struct {
				ID  string
				Pos int64
			}{ID: n.ID})
		}
	case f.Del != nil:
		out.Room, out.IDs = f.Del.Room, f.Del.IDs
	case f.Error != nil:
		out.Room, out.Code, out.RetryAfterMs = f.Error.Room, f.Error.Code, f.Error.RetryAfterMs
	}
	return out
}

// dialAs opens a viewer of room as user uid (query: more parameters).
func (r *secureRoles) dialAs(t *testing.T, room string, uid int64, query string) *wsviewer.Conn {
	t.Helper()
	u := r.cometWS + "?room=" + room + "&token=" + r.keys.Token(t, uid, "", nil)
	if query != "" {
		u += "&" + query
	}
	return wsviewer.DialConn(t, u, nil)
}

// next reads the next frame within d.
func next(t *testing.T, ws *wsviewer.Conn, d time.Duration) (wsFrame, error) {
	t.Helper()
	f, _, err := ws.Next(d)
	return flatFrame(f), err
}

// readOp reads frames until one of op; other ops are skipped.
func readOp(t *testing.T, ws *wsviewer.Conn, op string) wsFrame {
	t.Helper()
	return flatFrame(ws.NextOp(t, op, 20*time.Second))
}

// expectBanned reads the error frame "banned" and the close 4003.
func expectBanned(t *testing.T, ws *wsviewer.Conn) {
	t.Helper()
	if f := readOp(t, ws, "error"); f.Code != "banned" {
		t.Fatalf("error frame %+v, want banned", f)
	}
	_, _, err := ws.NextRaw(10 * time.Second)
	if !websocket.IsCloseError(err, 4003) {
		t.Fatalf("after the error frame: %v, want close 4003", err)
	}
}

func ping(t *testing.T, ws *wsviewer.Conn) {
	t.Helper()
	ws.MustSend(t, danmaku.ClientFrame{Op: danmaku.OpPing})
	readOp(t, ws, "pong")
}

// checkBan: a ban closes the user's sockets to the room with 4003 and not
// the others', refuses the user's sends (403 banned) and joins (4003), and
// both are allowed again after the duration; unban lifts a ban at once.
func (r *secureRoles) checkBan(t *testing.T) {
	room := testkit.Uniq("ban_")
	bad, good := int64(47), int64(48)
	ws1 := r.dialAs(t, room, bad, "")
	ws2 := r.dialAs(t, room, good, "")
	readOp(t, ws1, "welcome")
	readOp(t, ws2, "welcome")
	tok := r.keys.Token(t, bad, "dave", nil)
	expect(t, "before the ban", r.post(t, "/logic/send", tok, "192.0.2.20", sendBody(room, 0, "", "hi")), 202, "")
	ban := fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"3s","actor":"mod-2"}`, bad, room)
	expect(t, "ban", r.post(t, "/logic/admin/ban", adminSecret, "192.0.2.21", ban), 200, "")
	expectBanned(t, ws1)
	ping(t, ws2)
	expect(t, "banned send", r.post(t, "/logic/send", tok, "192.0.2.20", sendBody(room, 0, "", "hi")), 403, "banned")
	expectBanned(t, r.dialAs(t, room, bad, ""))
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		if a := r.post(t, "/logic/send", tok, "192.0.2.20", sendBody(room, 0, "", "back")); a.status != 202 {
			return fmt.Errorf("send after the ban: %d %s", a.status, a.Error.Code)
		}
		return nil
	})
	readOp(t, r.dialAs(t, room, bad, ""), "welcome")
	ban = fmt.Sprintf(`{"userId":%d,"roomId":"%s","duration":"1h"}`, bad, room)
	expect(t, "a long ban", r.post(t, "/logic/admin/ban", adminSecret, "192.0.2.21", ban), 200, "")
	expect(t, "unban", r.post(t, "/logic/admin/unban", adminSecret, "192.0.2.21", fmt.Sprintf(`{"userId":%d,"roomId":"%s"}`, bad, room)), 200, "")
	readOp(t, r.dialAs(t, room, bad, ""), "welcome")
}

// checkDelete: a deleted message reaches every viewer of the room as the
// del frame; a resume from before it, a fresh join's history and GET
// /logic/history leave it out, and the resume is recovered (no gap).
func (r *secureRoles) checkDelete(t *testing.T) {
	room := testkit.Uniq("del_")
	viewers := []*wsviewer.Conn{r.dialAs(t, room, 50, ""), r.dialAs(t, room, 51, "")}
	for _, ws := range viewers {
		readOp(t, ws, "welcome")
	}
	sent := r.post(t, "/logic/send", r.keys.Token(t, 52, "erin", nil), "192.0.2.22", sendBody(room, 0, "", "one", "two", "three"))
	expect(t, "send", sent, 202, "")
	ids := sent.MsgIDs
	var epoch string
	var first int64
	for _, ws := range viewers {
		var got []string
		for len(got) < 3 {
			f := readOp(t, ws, "msgs")
			for _, m := range f.Msgs {
				got = append(got, m.ID)
				if m.ID == ids[0] {
					epoch, first = f.Epoch, m.Pos
				}
			}
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("viewer got %v, want %v", got, ids)
		}
	}
	del := `{"roomId":"` + room + `","ids":["` + ids[1] + `"],"actor":"mod-3"}`
	expect(t, "delete", r.post(t, "/logic/admin/delete", adminSecret, "192.0.2.23", del), 200, "")
	for _, ws := range viewers {
		if f := readOp(t, ws, "del"); f.Room != room || !slices.Equal(f.IDs, ids[1:2]) {
			t.Fatalf("del frame %+v", f)
		}
	}
	kept := []string{ids[0], ids[2]}
	resumed := r.dialAs(t, room, 53, "since="+strconv.FormatInt(first, 10)+"&epoch="+epoch)
	if w := readOp(t, resumed, "welcome"); w.Recovered == nil || !*w.Recovered {
		t.Fatalf("resume over the deleted message: %+v, want recovered", w)
	}
	if f := readOp(t, resumed, "msgs"); len(f.Msgs) != 1 || f.Msgs[0].ID != ids[2] || !f.Replay {
		t.Fatalf("resume replay %+v, want only %s", f, ids[2])
	}
	fresh := r.dialAs(t, room, 54, "")
	readOp(t, fresh, "welcome")
	var onJoin []string
	for _, m := range readOp(t, fresh, "msgs").Msgs {
		onJoin = append(onJoin, m.ID)
	}
	if !slices.Equal(onJoin, kept) {
		t.Fatalf("history on join %v, want %v", onJoin, kept)
	}
	req, _ := http.NewRequest(http.MethodGet, r.logicURL+"/logic/history?since=0&roomId="+room, nil)
	req.Header.Set("Authorization", "Bearer "+r.keys.Token(t, 50, "", []string{room}))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct{ Messages []struct{ ID string } }
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &h)
	var hist []string
	for _, m := range h.Messages {
		hist = append(hist, m.ID)
	}
	if !slices.Equal(hist, kept) {
		t.Fatalf("GET /logic/history: %s, want %v", b, kept)
	}
}
