// Package vodstoretest is the conformance suite of vodstore.Store: every
// engine runs it against a real database of its kind.
package vodstoretest

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/vodstore"
)

// Open returns a migrated, empty store of the engine under test, closed
// when t ends.
type Open func(t *testing.T) vodstore.Store

// MustOpen opens and migrates the store dsn names, closed when tb ends.
func MustOpen(tb testing.TB, dsn string) vodstore.Store {
	tb.Helper()
	s, err := vodstore.Open(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}

// Run runs every conformance test as a subtest of t.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, vodstore.Store)
	}{
		{"StartStreamIdempotent", testStartStream},
		{"WriteOnce", testWriteOnce},
		{"WriteOnceLargeBatch", testWriteOnceLarge},
		{"CommentsRangeAndOrder", testCommentsRange},
		{"TombstonesEitherOrder", testTombstones},
		{"EndOnce", testEnd},
		{"RecentAndStreams", testRecent},
		{"Density", testDensity},
		{"IDsSince", testIDsSince},
		{"Positions", testPositions},
		{"Epochs", testEpochs},
		{"EpochsPerStream", testEpochsPerStream},
		{"Prune", testPrune},
		{"Unicode", testUnicode},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
	t.Run("MigrateTwice", func(t *testing.T) {
		s := open(t)
		if err := s.Migrate(ctx(t)); err != nil {
			t.Fatalf("second migration: %v", err)
		}
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// base is a start time shared by the tests: a fixed day, so partitions
// are created once.
var base = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC).UnixMilli()

// MustStart starts a live stream of room at start.
func MustStart(t *testing.T, s vodstore.Store, room, id string, start int64) vodstore.Stream {
	t.Helper()
	st, err := s.StartStream(ctx(t), vodstore.Stream{Room: room, ID: id, Start: start, Part: 3, StartOff: 100})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// MustWrite writes b and returns the number of new rows.
func MustWrite(t *testing.T, s vodstore.Store, b vodstore.Batch) int {
	t.Helper()
	n, err := s.Write(ctx(t), &b)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func row(st vodstore.Stream, id string, off int64) vodstore.Row {
	return vodstore.Row{SID: st.SID, Comment: vodstore.Comment{ID: id, UID: 7, Name: "viewer", Content: "comment " + id, Offset: off}}
}

func ids(cs []vodstore.Comment) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func testStartStream(t *testing.T, s vodstore.Store) {
	a := MustStart(t, s, "r1", "s1", base)
	b := MustStart(t, s, "r1", "s1", base+5000) // a redelivered start
	if a.SID == 0 || a != b {
		t.Fatalf("second start of s1 = %+v, want the first %+v", b, a)
	}
	if !a.Live() || a.EndOff != -1 || a.Part != 3 || a.StartOff != 100 || a.Start != base {
		t.Errorf("stream = %+v", a)
	}
	c := MustStart(t, s, "r1", "s2", base+1)
	d := MustStart(t, s, "r2", "s1", base+1) // same id, another room
	if c.SID <= a.SID || d.SID == c.SID {
		t.Errorf("SIDs %d, %d, %d: want ordered by start and distinct", a.SID, c.SID, d.SID)
	}
	got, err := s.Stream(ctx(t), "r1", "s1")
	if err != nil || got != a {
		t.Errorf("Stream = %+v, %v; want %+v", got, err, a)
	}
	if _, err := s.Stream(ctx(t), "r1", "nope"); !vodstore.IsNotFound(err) {
		t.Errorf("missing stream: %v, want not found", err)
	}
}

func testWriteOnce(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	b := vodstore.Batch{Rows: []vodstore.Row{row(st, "a", 10), row(st, "b", 10), row(st, "c", 20)}}
	if n := MustWrite(t, s, b); n != 3 {
		t.Fatalf("first write stored %d, want 3", n)
	}
	b.Rows = append(b.Rows, row(st, "d", 30)) // a redelivery plus one new
	if n := MustWrite(t, s, b); n != 1 {
		t.Fatalf("redelivery stored %d, want 1", n)
	}
	got, err := s.Comments(ctx(t), st, 0, vodstore.SegmentMS)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d"}; !reflect.DeepEqual(ids(got), want) {
		t.Errorf("comments %v, want %v", ids(got), want)
	}
	if got, _ := s.Stream(ctx(t), "r1", "s1"); got.Count != 4 {
		t.Errorf("count %d, want 4", got.Count)
	}
	want := vodstore.Comment{ID: "a", UID: 7, Name: "viewer", Content: "comment a", Offset: 10}
	if got[0] != want {
		t.Errorf("comment %+v, want %+v", got[0], want)
	}
}

// A batch of many rows of two streams, half of them stored by an earlier
// batch, stores each new row once and counts it in its own stream.
func testWriteOnceLarge(t *testing.T, s vodstore.Store) {
	sts := []vodstore.Stream{MustStart(t, s, "r1", "s1", base), MustStart(t, s, "r2", "s1", base)}
	var first, all []vodstore.Row
	for i := range 601 {
		r := row(sts[i%3/2], fmt.Sprint("c", i), int64(i))
		if i%2 == 0 {
			first = append(first, r)
		}
		all = append(all, r)
	}
	if n := MustWrite(t, s, vodstore.Batch{Rows: first}); n != 301 {
		t.Fatalf("first write stored %d, want 301", n)
	}
	if n := MustWrite(t, s, vodstore.Batch{Rows: all}); n != 300 {
		t.Fatalf("second write stored %d, want 300", n)
	}
	for i, want := range []int64{401, 200} {
		got, err := s.Comments(ctx(t), sts[i], 0, vodstore.SegmentMS)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := s.Stream(ctx(t), sts[i].Room, "s1")
		if int64(len(got)) != want || st.Count != want {
			t.Errorf("stream %d: %d comments, count %d, want %d", i, len(got), st.Count, want)
		}
	}
}

func testCommentsRange(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	other := MustStart(t, s, "r1", "s2", base+1)
	seg := int64(vodstore.SegmentMS)
	rows := []vodstore.Row{row(st, "z", 0), row(st, "y", 0), row(st, "end0", seg-1), row(st, "seg1", seg), row(other, "x", 5)}
	pri := row(st, "p", 7)
	pri.Flags = vodstore.FlagHigh
	rows = append(rows, pri)
	MustWrite(t, s, vodstore.Batch{Rows: rows})
	got, err := s.Comments(ctx(t), st, 0, seg)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"y", "z", "p", "end0"}; !reflect.DeepEqual(ids(got), want) {
		t.Errorf("segment 0 = %v, want %v (offset order, then id)", ids(got), want)
	}
	if got[2].Flags != vodstore.FlagHigh {
		t.Errorf("flags of p = %d", got[2].Flags)
	}
	got, _ = s.Comments(ctx(t), st, seg, 2*seg)
	if want := []string{"seg1"}; !reflect.DeepEqual(ids(got), want) {
		t.Errorf("segment 1 = %v, want %v", ids(got), want)
	}
	got, _ = s.Comments(ctx(t), st, 2*seg, 3*seg)
	if got == nil || len(got) != 0 {
		t.Errorf("empty segment = %#v, want an empty list", got)
	}
}

func testTombstones(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{row(st, "a", 1), row(st, "b", 2)}})
	// Deleted after it was stored; hidden before it arrives; a tombstone
	// of another room hides nothing here.
	MustWrite(t, s, vodstore.Batch{Tombstones: []vodstore.Tombstone{{Room: "r1", ID: "a"}, {Room: "r1", ID: "c"}, {Room: "r2", ID: "b"}}})
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{row(st, "c", 3), row(st, "d", 4)}})
	MustWrite(t, s, vodstore.Batch{Tombstones: []vodstore.Tombstone{{Room: "r1", ID: "a"}}}) // again
	got, err := s.Comments(ctx(t), st, 0, vodstore.SegmentMS)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"b", "d"}; !reflect.DeepEqual(ids(got), want) {
		t.Errorf("visible %v, want %v", ids(got), want)
	}
	d, err := s.Density(ctx(t), st, 1000)
	if err != nil || !reflect.DeepEqual(d, []int64{2}) {
		t.Errorf("density %v, %v; want [2] (hidden ones not counted)", d, err)
	}
}

func testEnd(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	MustWrite(t, s, vodstore.Batch{Ends: []vodstore.End{{SID: st.SID, End: base + 60000, EndOff: 500}}})
	MustWrite(t, s, vodstore.Batch{Ends: []vodstore.End{{SID: st.SID, End: base + 90000, EndOff: 900}}}) // a later end changes nothing
	got, _ := s.Stream(ctx(t), "r1", "s1")
	if got.Live() || got.End != base+60000 || got.EndOff != 500 {
		t.Fatalf("ended stream %+v, want end %d at offset 500", got, base+60000)
	}
	if !got.Holds(3, 100) || !got.Holds(3, 499) || got.Holds(3, 500) || got.Holds(3, 99) || got.Holds(2, 200) {
		t.Errorf("Holds of %+v wrong", got)
	}
}

func testRecent(t *testing.T, s vodstore.Store) {
	old := MustStart(t, s, "r1", "old", base)
	MustWrite(t, s, vodstore.Batch{Ends: []vodstore.End{{SID: old.SID, End: base + 1000, EndOff: 150}}})
	ended := MustStart(t, s, "r1", "ended", base+2000)
	MustWrite(t, s, vodstore.Batch{Ends: []vodstore.End{{SID: ended.SID, End: base + 9000, EndOff: 250}}})
	live := MustStart(t, s, "r1", "live", base+10000)
	MustStart(t, s, "r2", "live", base+10000)
	MustStart(t, s, "r3", "live", base+10000)
	got, err := s.Recent(ctx(t), []string{"r1", "r2"}, base+5000)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range got {
		names = append(names, st.Room+"/"+st.ID)
	}
	if want := []string{"r1/ended", "r1/live", "r2/live"}; !reflect.DeepEqual(names, want) {
		t.Errorf("recent %v, want %v (oldest first)", names, want)
	}
	list, err := s.Streams(ctx(t), "r1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "live" || list[1].ID != "ended" || list[0].SID != live.SID {
		t.Errorf("streams %+v, want live then ended", list)
	}
}

func testDensity(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	var rows []vodstore.Row
	for i, off := range []int64{0, 500, 9999, 25000, 25001, 31000} {
		rows = append(rows, row(st, fmt.Sprint("m", i), off))
	}
	MustWrite(t, s, vodstore.Batch{Rows: rows})
	d, err := s.Density(ctx(t), st, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 0, 2, 1}; !reflect.DeepEqual(d, want) {
		t.Errorf("density %v, want %v", d, want)
	}
	empty := MustStart(t, s, "r1", "s2", base+1)
	if d, err := s.Density(ctx(t), empty, 10000); err != nil || d == nil || len(d) != 0 {
		t.Errorf("density of an empty stream %#v, %v", d, err)
	}
}

func testIDsSince(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	other := MustStart(t, s, "r1", "s2", base+1)
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{row(st, "a", 10), row(st, "b", 20), row(st, "c", 30), row(other, "x", 25)},
		Tombstones: []vodstore.Tombstone{{Room: "r1", ID: "c"}}})
	got, err := s.IDsSince(ctx(t), st, 20)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Offset < got[j].Offset })
	if want := []vodstore.Comment{{ID: "b", Offset: 20}, {ID: "c", Offset: 30}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ids since 20: %+v, want %+v (deleted ones too, one stream only)", got, want)
	}
}

// A comment is stored with its timeline position, or without one that a
// later write gives it; a redelivered row does not take it away, and
// reads and IDsSince return it.
func testPositions(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	a, b := row(st, "a", 10), row(st, "b", 20)
	a.Pos = 41
	a.Flags = vodstore.FlagHigh | vodstore.FlagModerator
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{a, b}})
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{row(st, "a", 10)}, // a redelivery without it
		Positions: []vodstore.Position{{SID: st.SID, Offset: 20, ID: "b", Pos: 42}, {SID: st.SID, Offset: 30, ID: "nowhere", Pos: 43}}})
	got, err := s.Comments(ctx(t), st, 0, vodstore.SegmentMS)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Pos != 41 || got[1].Pos != 42 || got[0].Flags != a.Flags {
		t.Fatalf("comments %+v, want a at 41 (flags %d) and b at 42", got, a.Flags)
	}
	since, err := s.IDsSince(ctx(t), st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []vodstore.Comment{{ID: "a", Offset: 10, Pos: 41}, {ID: "b", Offset: 20, Pos: 42}}; !reflect.DeepEqual(since, want) {
		t.Errorf("ids since 0: %+v, want %+v", since, want)
	}
}

// Positions of two epochs of one stream (the room's timeline started
// over, so positions count from 1 again) are stored and read each with
// its epoch, whether written with the comment or later; a position given
// again in another epoch replaces both; a position without an epoch
// reads without one; epochs are numbered per stream.
func testEpochs(t *testing.T, s vodstore.Store) {
	st, other := MustStart(t, s, "r1", "s1", base), MustStart(t, s, "r2", "s1", base)
	var rows []vodstore.Row
	for i, p := range []struct {
		epoch string
		pos   int64
	}{{"e1", 1}, {"e1", 2}, {"e2", 1}, {"", 5}, {"e2", 2}, {"", 0}} {
		r := row(st, fmt.Sprint("c", i), int64(10*i))
		r.Pos, r.Epoch, r.Flags = p.pos, p.epoch, vodstore.FlagHigh
		rows = append(rows, r)
	}
	late := row(other, "late", 10)
	MustWrite(t, s, vodstore.Batch{Rows: append(rows, late, row(other, "x", 20))})
	MustWrite(t, s, vodstore.Batch{Positions: []vodstore.Position{
		{SID: other.SID, Offset: 10, ID: "late", Pos: 7, Epoch: "e9"},
		{SID: st.SID, Offset: 50, ID: "c5", Pos: 3, Epoch: "e2"},
		{SID: st.SID, Offset: 10, ID: "c1", Pos: 1, Epoch: "e3"}, // delivered again in a third epoch
	}})
	got, err := s.Comments(ctx(t), st, 0, vodstore.SegmentMS)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for _, c := range got {
		pairs = append(pairs, fmt.Sprintf("%s:%s/%d/%d", c.ID, c.Epoch, c.Pos, c.Flags))
	}
	if want := "c0:e1/1/1 c1:e3/1/1 c2:e2/1/1 c3:/5/1 c4:e2/2/1 c5:e2/3/1"; strings.Join(pairs, " ") != want {
		t.Errorf("comments %v, want %s", pairs, want)
	}
	got, err = s.Comments(ctx(t), other, 0, vodstore.SegmentMS)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Epoch != "e9" || got[0].Pos != 7 || got[1].Epoch != "" || got[1].Pos != 0 {
		t.Errorf("other stream %+v, want late at e9/7 and x without a position", got)
	}
}

// A stream numbers at most 63 epochs: a position in a later one is not
// stored, its comment is (without it), and the epochs numbered before
// still read back.
func testEpochsPerStream(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	for i := range 65 {
		r := row(st, fmt.Sprint("c", i), int64(i))
		r.Pos, r.Epoch = 1, fmt.Sprint("e", i)
		MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{r}})
	}
	got, err := s.Comments(ctx(t), st, 0, vodstore.SegmentMS)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 65 {
		t.Fatalf("%d comments, want 65", len(got))
	}
	for i, c := range got {
		want := fmt.Sprint("e", i)
		if i >= 63 {
			want = ""
		}
		if c.Epoch != want || (c.Pos == 1) != (want != "") || c.Flags != 0 {
			t.Errorf("comment %d: epoch %q pos %d flags %d, want epoch %q", i, c.Epoch, c.Pos, c.Flags, want)
		}
	}
}

func testPrune(t *testing.T, s vodstore.Store) {
	day := int64(24 * 3600 * 1000)
	old := MustStart(t, s, "r1", "old", base-3*day)
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{row(old, "a", 1)}, Ends: []vodstore.End{{SID: old.SID, End: base - 3*day + 1000, EndOff: 101}}})
	oldLive := MustStart(t, s, "r1", "oldlive", base-3*day+5)
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{row(oldLive, "b", 1)}})
	recent := MustStart(t, s, "r1", "recent", base)
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{row(recent, "c", 1)}, Ends: []vodstore.End{{SID: recent.SID, End: base + 1000, EndOff: 300}}})
	n, err := s.Prune(ctx(t), time.UnixMilli(base-day))
	if err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want 1", n, err)
	}
	if _, err := s.Stream(ctx(t), "r1", "old"); !vodstore.IsNotFound(err) {
		t.Errorf("pruned stream still there: %v", err)
	}
	for _, st := range []vodstore.Stream{oldLive, recent} {
		got, err := s.Comments(ctx(t), st, 0, vodstore.SegmentMS)
		if err != nil || len(got) != 1 {
			t.Errorf("comments of %s after prune: %v, %v", st.ID, got, err)
		}
	}
	if size, err := s.Size(ctx(t)); err != nil || size <= 0 {
		t.Errorf("size %d, %v", size, err)
	}
	// The old day's partition is still used by the live stream: a new
	// stream there works.
	late := MustStart(t, s, "r1", "late", base-3*day+9)
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{row(late, "d", 1)}})
}

func testUnicode(t *testing.T, s vodstore.Store) {
	st := MustStart(t, s, "r1", "s1", base)
	c := vodstore.Comment{ID: "u1", UID: 1 << 40, Name: "観客", Content: "弾幕 🎉 'quote\" \\ back", Offset: 1 << 30}
	MustWrite(t, s, vodstore.Batch{Rows: []vodstore.Row{{SID: st.SID, Comment: c}}})
	got, err := s.Comments(ctx(t), st, 0, 1<<31-1)
	if err != nil || len(got) != 1 || got[0] != c {
		t.Errorf("got %+v, %v; want %+v", got, err, c)
	}
}
