package logic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/vodstoretest"
	"github.com/danmaku/danmaku/vodstore"
)

// stream/start and stream/end write stream events to the room's
// partition, in order with its messages; bad input is refused naming the
// field.
func TestAdminStreams(t *testing.T) {
	e, admin := adminEnv(t)
	room := testkit.Uniq("r")
	for path, bodies := range map[string]map[string]string{
		"/logic/admin/stream/start": {`{}`: "roomId", `{"roomId":"a:b"}`: "roomId", fmt.Sprintf(`{"roomId":"%s","streamId":"x y"}`, room): "streamId"},
		"/logic/admin/stream/end":   {`{"streamId":"s"}`: "roomId", fmt.Sprintf(`{"roomId":"%s","streamId":"x/y"}`, room): "streamId"},
	} {
		for body, field := range bodies {
			if r := admin(path, body); r.status != http.StatusBadRequest || r.errorBody(t).Field != field {
				t.Errorf("%s %s: %d %s, want 400 naming %s", path, body, r.status, r.body, field)
			}
		}
	}
	before := time.Now().UnixMilli()
	r := admin("/logic/admin/stream/start", fmt.Sprintf(`{"roomId":"%s","actor":"host"}`, room))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"streamId":"`) || !strings.Contains(string(r.body), `"action":"stream_start"`) {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	if r := admin("/logic/admin/stream/end", fmt.Sprintf(`{"roomId":"%s"}`, room)); r.status != http.StatusOK {
		t.Fatalf("end: %d %s", r.status, r.body)
	}
	if r := admin("/logic/admin/stream/start", fmt.Sprintf(`{"roomId":"%s","streamId":"talk-2"}`, room)); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"streamId":"talk-2"`) {
		t.Fatalf("start with an id: %d %s", r.status, r.body)
	}
	recs := readRoom(t, e, room, 3)
	var got []string
	for _, rec := range recs {
		env, err := danmaku.UnmarshalEnvelope(rec.Value)
		if err != nil || env.Event == nil || env.Event.At < before || env.Event.ID == "" {
			t.Fatalf("record %s: %v", rec.Value, err)
		}
		got = append(got, env.Event.Op+":"+env.Event.Stream)
	}
	start := strings.TrimPrefix(got[0], danmaku.OpStreamStart+":")
	if start == "" || got[1] != danmaku.OpStreamEnd+":" || got[2] != danmaku.OpStreamStart+":talk-2" {
		t.Errorf("records %v, want a start with a new id, an end of the live stream, a start of talk-2", got)
	}
}

// vodEnv is a logic Server reading a SQLite archive of its own, with one
// ended stream (s1) and one live (s2) of room.
func vodEnv(t *testing.T, tune func(*Config)) (*testEnv, vodstore.Store, string) {
	st := vodstoretest.MustOpen(t, "sqlite:"+filepath.Join(t.TempDir(), "vod.db"))
	e := newEnv(t, func(c *Config, e *testEnv) {
		e.vod = st
		if tune != nil {
			tune(c)
		}
	})
	return e, st, testkit.Uniq("r")
}

func fill(t *testing.T, st vodstore.Store, room, id string, start int64, ended bool, cs ...vodstore.Comment) vodstore.Stream {
	t.Helper()
	ctx := context.Background()
	s, err := st.StartStream(ctx, vodstore.Stream{Room: room, ID: id, Start: start, StartOff: 0, EndOff: -1})
	if err != nil {
		t.Fatal(err)
	}
	b := vodstore.Batch{}
	for _, c := range cs {
		b.Rows = append(b.Rows, vodstore.Row{SID: s.SID, Comment: c})
	}
	if ended {
		b.Ends = []vodstore.End{{SID: s.SID, End: start + 2*vodstore.SegmentMS, EndOff: 100}}
	}
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	return s
}

func comment(id string, off int64) vodstore.Comment {
	return vodstore.Comment{ID: id, UID: 5, Name: "v", Content: "c" + id, Offset: off}
}

// The VOD reads: a room's streams, a segment's comments by offset (a
// deleted one left out), the density, ETags and caching headers (immutable
// once the stream ended), 404 for an unknown stream and 400 naming the
// field for bad input.
func TestVODReads(t *testing.T) {
	e, st, room := vodEnv(t, nil)
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	fill(t, st, room, "s1", t0, true, comment("a", 42000), comment("b", 1000), comment("gone", 5000), comment("c", vodstore.SegmentMS+10))
	if _, err := st.Write(context.Background(), &vodstore.Batch{Tombstones: []vodstore.Tombstone{{Room: room, ID: "gone"}}}); err != nil {
		t.Fatal(err)
	}
	fill(t, st, room, "s2", t0+3*vodstore.SegmentMS, false, comment("live1", 10))

	get := func(path string, h ...string) response {
		return e.doWith(t, http.MethodGet, path, headers(h...), nil)
	}
	var streams danmaku.VODStreamsResponse
	r := get("/logic/vod/streams?roomId=" + room)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &streams) != nil || len(streams.Streams) != 2 ||
		streams.Streams[0].ID != "s2" || !streams.Streams[0].Live || streams.Streams[1].ID != "s1" || streams.Streams[1].Live ||
		streams.Streams[1].Count != 4 || streams.Streams[1].Segments != 3 || streams.Streams[1].End != t0+2*vodstore.SegmentMS {
		t.Fatalf("streams: %d %s", r.status, r.body)
	}

	var seg danmaku.VODSegmentResponse
	r = get(fmt.Sprintf("/logic/vod/segment?roomId=%s&streamId=s1&seg=0", room))
	if r.status != http.StatusOK || json.Unmarshal(r.body, &seg) != nil || !seg.Final || seg.Omitted != 0 ||
		len(seg.Comments) != 2 || seg.Comments[0].ID != "b" || seg.Comments[1].ID != "a" || seg.Comments[1].Offset != 42000 {
		t.Fatalf("segment 0: %d %s", r.status, r.body)
	}
	etag := r.header.Get("ETag")
	if etag == "" || !strings.Contains(r.header.Get("Cache-Control"), "immutable") {
		t.Errorf("ended segment headers: %v", r.header)
	}
	if r := get(fmt.Sprintf("/logic/vod/segment?roomId=%s&streamId=s1&seg=0", room), "If-None-Match", etag); r.status != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", r.status)
	}
	r = get(fmt.Sprintf("/logic/vod/segment?roomId=%s&streamId=s1&seg=1", room))
	if json.Unmarshal(r.body, &seg) != nil || len(seg.Comments) != 1 || seg.Comments[0].ID != "c" || seg.From != vodstore.SegmentMS {
		t.Errorf("segment 1: %d %s", r.status, r.body)
	}
	r = get(fmt.Sprintf("/logic/vod/segment?roomId=%s&streamId=s2&seg=0", room))
	if r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-cache" || !strings.Contains(string(r.body), `"final":false`) {
		t.Errorf("live segment: %d %v %s", r.status, r.header, r.body)
	}

	var dens danmaku.VODDensityResponse
	r = get(fmt.Sprintf("/logic/vod/density?roomId=%s&streamId=s1&bucket=10s", room))
	if r.status != http.StatusOK || json.Unmarshal(r.body, &dens) != nil || dens.BucketMS != 10000 || len(dens.Counts) != 37 ||
		dens.Counts[0] != 1 || dens.Counts[4] != 1 || dens.Counts[36] != 1 {
		t.Errorf("density: %d %s", r.status, r.body)
	}

	if r := get(fmt.Sprintf("/logic/vod/segment?roomId=%s&streamId=nope&seg=0", room)); r.status != http.StatusNotFound || r.errorBody(t).Field != "streamId" {
		t.Errorf("unknown stream: %d %s", r.status, r.body)
	}
	for q, field := range map[string]string{
		"/logic/vod/streams?roomId=a:b":                             "roomId",
		"/logic/vod/streams?roomId=r&limit=0":                       "limit",
		"/logic/vod/segment?roomId=r&streamId=s1":                   "seg",
		"/logic/vod/segment?roomId=r&streamId=s1&seg=-1":            "seg",
		"/logic/vod/segment?roomId=r&streamId=s1&seg=x":             "seg",
		"/logic/vod/segment?roomId=r&seg=1":                         "streamId",
		"/logic/vod/segment?roomId=r&streamId=a%20b&seg=1":          "streamId",
		"/logic/vod/density?roomId=r&streamId=s1&bucket=10":         "bucket",
		"/logic/vod/density?roomId=r&streamId=s1&bucket=10ms":       "bucket",
		"/logic/vod/density?roomId=r&streamId=s1&bucket=1.0000001s": "bucket",
		"/logic/vod/density?roomId=r":                               "streamId",
	} {
		if r := get(q); r.status != http.StatusBadRequest || r.errorBody(t).Field != field {
			t.Errorf("%s: %d %s, want 400 naming %s", q, r.status, r.body, field)
		}
	}
}

// Over the cap a segment keeps every priority comment and a deterministic
// sample of the others, and says how many it left out.
func TestVODSegmentCap(t *testing.T) {
	e, st, room := vodEnv(t, func(c *Config) { c.VODSegmentCap = 100 })
	var cs []vodstore.Comment
	for i := range 300 {
		c := comment(fmt.Sprint("m", i), int64(i)*1000)
		if i%30 == 0 {
			c.Flags = vodstore.FlagHigh
		}
		cs = append(cs, c)
	}
	fill(t, st, room, "s1", time.Now().UnixMilli(), false, cs...)
	read := func() danmaku.VODSegmentResponse {
		var seg danmaku.VODSegmentResponse
		r := e.doWith(t, http.MethodGet, fmt.Sprintf("/logic/vod/segment?roomId=%s&streamId=s1&seg=0", room), nil, nil)
		if r.status != http.StatusOK || json.Unmarshal(r.body, &seg) != nil {
			t.Fatalf("segment: %d %s", r.status, r.body)
		}
		return seg
	}
	a, b := read(), read()
	if len(a.Comments) != 100 || a.Omitted != 200 || !reflect.DeepEqual(a, b) {
		t.Fatalf("kept %d, omitted %d (want 100, 200); same twice: %v", len(a.Comments), a.Omitted, reflect.DeepEqual(a, b))
	}
	high := 0
	for i, c := range a.Comments {
		if c.Flags == vodstore.FlagHigh {
			high++
		}
		if i > 0 && c.Offset < a.Comments[i-1].Offset {
			t.Fatal("not in offset order")
		}
	}
	if high != 10 {
		t.Errorf("%d priority comments kept, want all 10", high)
	}
}

// Without logic.archive_dsn the VOD API is 404.
func TestVODOff(t *testing.T) {
	e := newEnv(t)
	r := e.doWith(t, http.MethodGet, "/logic/vod/streams?roomId=r", nil, nil)
	if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "archive_dsn") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// countingVOD counts the segment reads that reach the database, each
// taking delay.
type countingVOD struct {
	VODStore
	delay time.Duration
	reads atomic.Int64
}

func (c *countingVOD) Comments(ctx context.Context, st vodstore.Stream, from, to int64) ([]vodstore.Comment, error) {
	c.reads.Add(1)
	time.Sleep(c.delay)
	return c.VODStore.Comments(ctx, st, from, to)
}

// A live stream's segment is read from the database at most once per
// logic.vod_live_cache: requests meanwhile are answered from memory, the
// first past it gets the answer held while one background read brings it
// up to date, and requests for an answer nobody holds share one read.
// With vod_live_cache 0 nothing is kept, but requests that come while a
// read is in flight share it.
func TestVODLiveCache(t *testing.T) {
	const fresh = 200 * time.Millisecond
	for _, c := range []struct {
		name  string
		fresh time.Duration
	}{{"cached", fresh}, {"off", 0}} {
		t.Run(c.name, func(t *testing.T) {
			st := vodstoretest.MustOpen(t, "sqlite:"+filepath.Join(t.TempDir(), "vod.db"))
			db := &countingVOD{VODStore: st, delay: 50 * time.Millisecond}
			e := newEnv(t, func(cfg *Config, e *testEnv) { e.vod = db; cfg.VODLiveCache = c.fresh })
			room := testkit.Uniq("r")
			s := fill(t, st, room, "s1", time.Now().UnixMilli(), false, comment("a", 10))
			url := fmt.Sprintf("/logic/vod/segment?roomId=%s&streamId=s1&seg=0", room)
			read := func() []string {
				var seg danmaku.VODSegmentResponse
				r := e.doWith(t, http.MethodGet, url, nil, nil)
				if r.status != http.StatusOK || json.Unmarshal(r.body, &seg) != nil {
					t.Errorf("segment: %d %s", r.status, r.body)
				}
				var ids []string
				for _, c := range seg.Comments {
					ids = append(ids, c.ID)
				}
				return ids
			}
			var wg sync.WaitGroup
			for range 20 { // at once, nothing held yet
				wg.Add(1)
				go func() { defer wg.Done(); read() }()
			}
			wg.Wait()
			if c.fresh == 0 {
				// Nothing is kept, but requests share the read in flight:
				// a miss storm is not one read per request.
				if n := db.reads.Load(); n > 2 {
					t.Errorf("%d database reads for 20 requests at once, want 1 or 2 with the cache off", n)
				}
				mustWriteRow(t, st, s, comment("b", 20))
				if got := read(); !reflect.DeepEqual(got, []string{"a", "b"}) {
					t.Errorf("after a write: %v, want [a b] at once", got)
				}
				return
			}
			if n := db.reads.Load(); n != 1 {
				t.Errorf("%d database reads for 20 concurrent requests, want 1", n)
			}
			mustWriteRow(t, st, s, comment("b", 20))
			if got := read(); !reflect.DeepEqual(got, []string{"a"}) || db.reads.Load() != 1 {
				t.Errorf("within %v: %v after %d reads, want [a] from memory", fresh, got, db.reads.Load())
			}
			time.Sleep(fresh)
			start := time.Now()
			if got := read(); !reflect.DeepEqual(got, []string{"a"}) || time.Since(start) >= db.delay {
				t.Errorf("past %v: %v in %v, want the held [a] without waiting for the database", fresh, got, time.Since(start))
			}
			testkit.SucceedsSoon(t, 5*time.Second, func() error {
				if got := read(); !reflect.DeepEqual(got, []string{"a", "b"}) {
					return fmt.Errorf("got %v, want [a b] once read again", got)
				}
				return nil
			})
			if n := db.reads.Load(); n != 2 {
				t.Errorf("%d database reads, want 2", n)
			}
		})
	}
}

// mustWriteRow stores c in stream s.
func mustWriteRow(t *testing.T, st vodstore.Store, s vodstore.Stream, c vodstore.Comment) {
	t.Helper()
	if _, err := st.Write(context.Background(), &vodstore.Batch{Rows: []vodstore.Row{{SID: s.SID, Comment: c}}}); err != nil {
		t.Fatal(err)
	}
}
