package logic

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/route"
)

// GET /logic/admin/rooms lists the rooms with viewers, most first, with
// their timeline heads; a room named is read even without viewers; a
// moderator sees the rooms it moderates only and may not name others;
// the admin secret or a moderator token is required.
func TestAdminRooms(t *testing.T) {
	e, _, send, token := modesEnv(t)
	const secret = "admin-secret-0123456789"
	busy, quiet, idle := testkit.Uniq("busy_"), testkit.Uniq("quiet_"), testkit.Uniq("idle_")
	store := route.New(e.rdb)
	for i, room := range []string{busy, busy, quiet} {
		c := route.Conn{ID: testkit.Uniq("c"), Room: room, Comet: "comet-rooms-test"}
		if err := store.Register(context.Background(), c); err != nil {
			t.Fatalf("register viewer %d: %v", i, err)
		}
	}
	t.Cleanup(func() { store.RemoveComet(context.Background(), "comet-rooms-test") })
	sender := token(newUser(), nil)
	if r := send(sender, busy, "hello"); r.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	get := func(tok, query string, want int) []danmaku.RoomLoad {
		t.Helper()
		r := e.doWith(t, http.MethodGet, "/logic/admin/rooms"+query, headers("Authorization", "Bearer "+tok), nil)
		if r.status != want {
			t.Fatalf("rooms%s: %d %s, want %d", query, r.status, r.body, want)
		}
		var res danmaku.RoomsResponse
		if want == http.StatusOK {
			if err := json.Unmarshal(r.body, &res); err != nil || res.Rooms == nil {
				t.Fatalf("rooms%s: %s (%v)", query, r.body, err)
			}
		}
		return res.Rooms
	}
	index := func(loads []danmaku.RoomLoad, room string) int {
		for i, l := range loads {
			if l.RoomID == room {
				return i
			}
		}
		return -1
	}
	all := get(secret, "", http.StatusOK)
	b, q := index(all, busy), index(all, quiet)
	if b < 0 || q < 0 || b > q || all[b].Online != 2 || all[q].Online != 1 || index(all, idle) >= 0 {
		t.Fatalf("active rooms %+v: want %s (2) before %s (1), not %s", all, busy, quiet, idle)
	}
	named := get(secret, "?roomId="+idle+"&roomId="+quiet, http.StatusOK)
	if len(named) != 2 || named[0].RoomID != quiet || named[1].RoomID != idle || named[1].Online != 0 {
		t.Fatalf("named rooms: %+v", named)
	}

	mod := token(newUser(), []string{busy, idle}, auth.RoleModerator)
	mine := get(mod, "", http.StatusOK)
	if len(mine) != 2 || mine[0].RoomID != busy || mine[0].Online != 2 || mine[1].RoomID != idle {
		t.Fatalf("a moderator's rooms: %+v", mine)
	}
	r := e.doWith(t, http.MethodGet, "/logic/admin/rooms?roomId="+quiet, headers("Authorization", "Bearer "+mod), nil)
	wantRefused(t, "a moderator naming another room", r, http.StatusForbidden, danmaku.CodeForbidden, "roomId")
	r = e.doWith(t, http.MethodGet, "/logic/admin/rooms?roomId=a%7Bb", headers("Authorization", "Bearer "+secret), nil)
	wantRefused(t, "an invalid room", r, http.StatusBadRequest, danmaku.EINVALID, "roomId")
	r = e.doWith(t, http.MethodGet, "/logic/admin/rooms", headers("Authorization", "Bearer "+token(newUser(), nil)), nil)
	wantRefused(t, "a viewer's token", r, http.StatusUnauthorized, danmaku.EUNAUTH, "Authorization")
}
