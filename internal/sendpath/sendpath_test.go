package sendpath

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
)

func TestIDGen(t *testing.T) {
	now := time.UnixMilli(1_763_000_000_000)
	g := NewIDGen(513)
	g.now = func() time.Time { return now }

	var ids []string
	for i := 0; i < 70_000; i++ { // more than one millisecond's sequence
		ids = append(ids, g.Next())
	}
	now = now.Add(-time.Hour) // clock steps back
	ids = append(ids, g.Next())
	now = now.Add(2 * time.Hour)
	ids = append(ids, g.Next())

	if !sort.StringsAreSorted(ids) {
		t.Fatal("ids are not increasing")
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		if len(id) != IDLen || strings.Contains(id, "-") || danmaku.CheckID("id", id) != nil {
			t.Fatalf("bad id %q", id)
		}
	}
	if ts, ok := IDTime(ids[0]); !ok || !ts.Equal(time.UnixMilli(1_763_000_000_000)) {
		t.Fatalf("IDTime(first) = %v, %v", ts, ok)
	}
	// 70,000 ids overflow one millisecond's 65,536 sequence numbers.
	if ts, _ := IDTime(ids[69_999]); ts.UnixMilli() != 1_763_000_000_001 {
		t.Fatalf("after overflow ts = %d, want the next millisecond", ts.UnixMilli())
	}
	if ts, _ := IDTime(ids[len(ids)-1]); !ts.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("IDTime(last) = %v, want %v", ts, now)
	}
	// Two nodes in the same millisecond never collide.
	h := NewIDGen(514)
	h.now = g.now
	if a, b := g.Next(), h.Next(); a == b {
		t.Fatalf("nodes 513 and 514 both made %q", a)
	}
}

func TestClientMsgID(t *testing.T) {
	for _, tc := range []struct {
		uid      int64
		in, want string
		ok       bool
	}{
		{7, "abc", "u7-abc", true},
		{7, "u7-abc", "u7-abc", true},
		{7, "u8-abc", "u7-u8-abc", true},
		{7, "u7-", "u7-u7-", true},
		{1<<63 - 1, strings.Repeat("k", MaxClientIDLen), "u9223372036854775807-" + strings.Repeat("k", MaxClientIDLen), true},
		{1<<63 - 1, strings.Repeat("k", 44), "", false},
		{7, "a:b", "", false},
		{7, "", "", false},
	} {
		got, err := ClientMsgID("f", tc.uid, tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ClientMsgID(%d, %q) = %q, %v; want %q ok=%v", tc.uid, tc.in, got, err, tc.want, tc.ok)
		}
		if err == nil && danmaku.CheckID("id", got) != nil {
			t.Errorf("ClientMsgID(%d, %q) = %q is not a valid id", tc.uid, tc.in, got)
		}
	}
}

// Names and comments that show nothing are blank, and a name may not
// reorder the text after it.
func TestInvisibleAndBidiText(t *testing.T) {
	l := Limits{MaxMessages: 5, MaxContent: 200, MaxName: 32}
	cases := []struct {
		name, userName, content, field string
	}{
		{"zero-width name", "\u200B\u200B", "hi", "userName"},
		{"soft hyphen name", "\u00AD", "hi", "userName"},
		{"hangul filler name", "\u3164", "hi", "userName"},
		{"braille blank name", "\u2800", "hi", "userName"},
		{"lone combining marks", "\u0301\u0301", "hi", "userName"},
		{"right-to-left override", "\u202Enimda", "hi", "userName"},
		{"isolate", "ann\u2067x", "hi", "userName"},
		{"right-to-left mark", "ann\u200F", "hi", "userName"},
		{"zero-width comment", "ann", "\u200B\u200D\uFEFF", "messages[0].content"},
		{"word joiners and spaces", "ann", " \u2060 \u3000", "messages[0].content"},
		{"visible", "ann", "hi\u200Bthere", ""},
		{"arabic name", "مرحبا", "hi", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := danmaku.SendRequest{RoomID: "r", UserID: 1, UserName: tc.userName, Messages: []danmaku.SendMessage{{Content: tc.content}}}
			_, err := l.Validate(&req)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var de *danmaku.Error
			if !errors.As(err, &de) || de.Code != danmaku.EINVALID || de.Field != tc.field {
				t.Fatalf("got %v, want invalid_argument on %s", err, tc.field)
			}
		})
	}
}
