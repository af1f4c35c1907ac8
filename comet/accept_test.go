package comet

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// The rooms of a /ws URL: every room once, in order; plain since/epoch
// for the first, since.ROOM/epoch.ROOM for any.
func TestRoomsOfURL(t *testing.T) {
	cases := []struct {
		query string
		want  string // room[/since/epoch] ..., then "bad:" count
	}{
		{"", "bad:0"},
		{"room=a", "a bad:0"},
		{"room=a&since=5&epoch=E", "a/5/E bad:0"},
		{"since=5&epoch=E&room=a", "a/5/E bad:0"},
		{"room=a&since=x&epoch=E", "a bad:0"},
		{"room=a&since=-1", "a bad:0"},
		{"room=a&since=5&epoch=E&room=b", "a/5/E b bad:0"},
		{"room=a&room=b&since.b=7&epoch.b=F", "a b/7/F bad:0"},
		{"room=a&since=1&epoch=E&since.a=2&epoch.a=G", "a/2/G bad:0"},
		{"room=a.b&since.a.b=3&epoch.a.b=E", "a.b/3/E bad:0"},
		{"room=a&room=&room=a&room=b%3Ac&room=c", "a c bad:1"},
		{"room=b%3Ac&room=c&since=4&epoch=E", "c bad:1"},
	}
	for _, tc := range cases {
		u := roomsOfURL(httptest.NewRequest("GET", "/ws?"+tc.query, nil), 8)
		var parts []string
		for _, r := range u.reqs {
			p := r.room
			if r.resume {
				p += fmt.Sprintf("/%d/%s", r.since, r.epoch)
			}
			parts = append(parts, p)
		}
		parts = append(parts, fmt.Sprintf("bad:%d", len(u.bad)))
		if got := strings.Join(parts, " "); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.query, got, tc.want)
		}
	}
}
