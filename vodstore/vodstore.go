// Package vodstore keeps the archive of live comments: a room's streams
// (live sessions) and the comments accepted during each, at their video
// offset, for replay over the recording. One interface, Store, has two
// engines: PostgreSQL (pgx) for production and SQLite (a pure-Go build) for
// the all-in-one binary and development; one conformance suite
// (vodstore/storetest) runs against both real engines.
//
// The archive role is the only writer; logic reads. Invariants:
//   - A comment is stored once per stream, keyed by (stream, offset, id):
//     a redelivered Kafka record has the same time, so the same offset,
//     and is not stored again (Write reports only the new ones).
//   - A comment hidden by a moderator (a deletion, a shadow hide) is
//     recorded as a tombstone of its room and id, in whatever order the
//     comment and the tombstone arrive: reads never return it.
//   - Offsets are milliseconds from the stream's start. Segments are
//     fixed windows of offsets (SegmentMS); a stream that ended never
//     changes again, so its segments can be cached for good.
//
// Streams have a small numeric key (SID) from a sequence, so later
// streams have larger keys: every comment row carries it (4 bytes on
// PostgreSQL), PostgreSQL partitions the comments by blocks of 65,536
// keys, and retention drops a block's partition once its streams are
// all gone.
package vodstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	"github.com/danmaku/danmaku"
)

// SegmentMS is the span of a segment: 6 minutes of offsets.
const SegmentMS = danmaku.VODSegmentMS

// blockShift: PostgreSQL keeps the comments of the streams whose SIDs
// share their bits above blockShift in one partition.
const blockShift = 16

// Stream is one live session of a room.
type Stream struct {
	Room string `json:"roomId"`
	ID   string `json:"id"`
	// SID is the stream's numeric key (see the package doc); not part of
	// the public API.
	SID int64 `json:"-"`
	// Start and End are Unix milliseconds; End is 0 while the stream is
	// live.
	Start int64 `json:"start"`
	End   int64 `json:"end,omitempty"`
	// Part, StartOff and EndOff place the stream in its room's Kafka
	// partition: the records of offsets [StartOff, EndOff) belong to it
	// (EndOff is -1 while live). The archive assigns comments by them, so
	// a redelivered record lands in the stream it landed in before.
	Part     int32 `json:"-"`
	StartOff int64 `json:"-"`
	EndOff   int64 `json:"-"`
	// Auto marks a stream the archive started by itself (the first
	// comment after a silence).
	Auto bool `json:"auto,omitempty"`
	// Count is the number of comments stored for it (deleted ones
	// included).
	Count int64 `json:"count"`
}

// Live reports whether the stream has not ended.
func (s Stream) Live() bool { return s.End == 0 }

// Holds reports whether the record at offset off of partition part
// belongs to s.
func (s Stream) Holds(part int32, off int64) bool {
	return part == s.Part && off >= s.StartOff && (s.EndOff < 0 || off < s.EndOff)
}

// Flags of a stored comment.
const (
	// FlagHigh marks a high-priority message: never sampled out.
	FlagHigh = 1 << iota
	// FlagModerator marks a moderator's message: never sampled out.
	FlagModerator
)

// Comment is one stored comment, as the segment API serves it.
type Comment = danmaku.VODComment

// kept reports whether Sample always keeps c.
func kept(c Comment) bool { return c.Flags&(FlagHigh|FlagModerator) != 0 }

// Row is a comment to store in stream SID.
type Row struct {
	SID int64
	Comment
}

// Tombstone hides message ID of Room from every read.
type Tombstone struct {
	Room string
	ID   string
}

// End ends stream SID at End (Unix ms), with EndOff the first record of
// its partition that is not its own.
type End struct {
	SID    int64
	End    int64
	EndOff int64
}

// Position gives the stored comment ID of stream SID at Offset its
// timeline position Pos in epoch Epoch: for a comment stored before its
// position was known.
type Position struct {
	SID    int64
	Offset int64
	ID     string
	Pos    int64
	Epoch  string
}

// Batch is one atomic write of the archive.
type Batch struct {
	Rows       []Row
	Tombstones []Tombstone
	Ends       []End
	Positions  []Position
}

// Empty reports whether b writes nothing.
func (b *Batch) Empty() bool {
	return len(b.Rows)+len(b.Tombstones)+len(b.Ends)+len(b.Positions) == 0
}

// Store is the archive's database. Every method honours ctx.
type Store interface {
	// Migrate brings the schema to the version of this build.
	Migrate(ctx context.Context) error
	// StartStream creates st (its SID is assigned here) unless the room
	// already has a stream of st.ID, and returns the stored stream either
	// way.
	StartStream(ctx context.Context, st Stream) (Stream, error)
	// Write applies b in one transaction and returns how many rows were
	// new. A row's or a position's epoch is kept with its position; a
	// stream keeps at most 63 epochs, and a position in a later one is
	// not stored (the comment is, without it).
	Write(ctx context.Context, b *Batch) (int, error)
	// Recent returns the streams of rooms that are live or ended after
	// since (Unix ms), oldest first: what the archive needs to place
	// records, redelivered ones included.
	Recent(ctx context.Context, rooms []string, since int64) ([]Stream, error)
	// Streams returns the newest streams of room, newest first, at most
	// limit.
	Streams(ctx context.Context, room string, limit int) ([]Stream, error)
	// Stream returns stream id of room, or an ENOTFOUND error.
	Stream(ctx context.Context, room, id string) (Stream, error)
	// Comments returns the visible comments of st with offsets in
	// [from, to), ordered by offset then id, with their positions and
	// the positions' epochs.
	Comments(ctx context.Context, st Stream, from, to int64) ([]Comment, error)
	// IDsSince returns the ids, offsets and positions (only those fields)
	// of the comments of st with offsets from from on, deleted ones
	// included: what the archive remembers again after a restart, so that
	// a client's retry of a comment stored before it is not stored twice
	// and a position that comes after its comment finds it.
	IDsSince(ctx context.Context, st Stream, from int64) ([]Comment, error)
	// Density returns the number of visible comments of st per bucket of
	// bucketMS milliseconds of offset, from offset 0 to the last comment.
	Density(ctx context.Context, st Stream, bucketMS int64) ([]int64, error)
	// Prune removes the streams that ended before before, with their
	// comments, and returns how many streams went.
	Prune(ctx context.Context, before time.Time) (int, error)
	// Size returns the bytes the comments take on disk (tables and
	// indexes), for the benchmarks.
	Size(ctx context.Context) (int64, error)
	Close() error
}

// Open opens the store dsn names: a postgres:// or postgresql:// URL, or
// sqlite:PATH (a file, created with its directory when missing).
func Open(ctx context.Context, dsn string) (Store, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn)
	case strings.HasPrefix(dsn, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	}
	return nil, danmaku.Errorf(danmaku.EINVALID, "archive.dsn", "want postgres://... or sqlite:PATH, got %q", redact(dsn))
}

// redact drops a URL's password for error messages.
func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i >= 0 {
		if j := strings.Index(dsn, "://"); j >= 0 && j < i {
			return dsn[:j+3] + "…" + dsn[i:]
		}
	}
	return dsn
}

// errNotFound is the ENOTFOUND error of a missing stream.
func errNotFound(room, id string) error {
	return danmaku.Errorf(danmaku.ENOTFOUND, "streamId", "room %s has no stream %s", room, id)
}

// IsNotFound reports whether err says a stream does not exist.
func IsNotFound(err error) bool {
	var e *danmaku.Error
	return errors.As(err, &e) && e.Code == danmaku.ENOTFOUND
}

// Sample keeps at most max of cs (ordered by offset), fairly: comments
// that are Kept always stay; of the others, those with the lowest hash of
// their id stay, so the same comments are chosen on every read and on
// every server. It returns the comments kept, still in offset order, and
// how many were left out.
func Sample(cs []Comment, max int) ([]Comment, int) {
	if max <= 0 || len(cs) <= max {
		return cs, 0
	}
	type cand struct {
		h uint64
		i int
	}
	var pinned int
	others := make([]cand, 0, len(cs))
	for i, c := range cs {
		if kept(c) {
			pinned++
			continue
		}
		others = append(others, cand{idHash(c.ID), i})
	}
	room := max - pinned
	if room < 0 {
		room = 0
	}
	keep := make([]bool, len(cs))
	if room < len(others) {
		sort.Slice(others, func(a, b int) bool { return others[a].h < others[b].h })
		others = others[:room]
	}
	for _, o := range others {
		keep[o.i] = true
	}
	out := make([]Comment, 0, pinned+len(others))
	for i, c := range cs {
		if keep[i] || kept(c) {
			out = append(out, c)
		}
	}
	return out, len(cs) - len(out)
}

func idHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// OffsetOf returns the offset of a comment accepted at ts in a stream that
// started at start: never negative (clocks of two logic instances may
// differ by a little).
func OffsetOf(ts, start int64) int64 {
	return max(ts-start, 0)
}

// rows is what both engines' query results offer.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanComments reads the rows of a comments query (id, uid, name,
// content, off_ms, flags, pos with 0 for none).
func scanComments(rs rows) ([]Comment, error) {
	out := []Comment{}
	for rs.Next() {
		var c Comment
		if err := rs.Scan(&c.ID, &c.UID, &c.Name, &c.Content, &c.Offset, &c.Flags, &c.Pos); err != nil {
			return nil, wrap("comments", err)
		}
		out = append(out, c)
	}
	return out, wrap("comments", rs.Err())
}

// scanIDs reads the rows of an ids query (id, off_ms, pos with 0 for
// none).
func scanIDs(rs rows) ([]Comment, error) {
	out := []Comment{}
	for rs.Next() {
		var c Comment
		if err := rs.Scan(&c.ID, &c.Offset, &c.Pos); err != nil {
			return nil, wrap("ids", err)
		}
		out = append(out, c)
	}
	return out, wrap("ids", rs.Err())
}

// scanDensity reads the rows of a density query (bucket, count), in
// bucket order, into counts with the empty buckets as zeros.
func scanDensity(rs rows) ([]int64, error) {
	out := []int64{}
	for rs.Next() {
		var b, n int64
		if err := rs.Scan(&b, &n); err != nil {
			return nil, wrap("density", err)
		}
		for int64(len(out)) < b {
			out = append(out, 0)
		}
		out = append(out, n)
	}
	return out, wrap("density", rs.Err())
}

func wrap(verb string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", verb, err)
}
