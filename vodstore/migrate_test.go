package vodstore

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit/pgserver"
)

// The first schema's data reads the same after the migration to compact
// stream keys, and the store keeps working on it: new streams get larger
// keys, redeliveries are still stored once, deletions still hide.
func TestMigrateCompactKeys(t *testing.T) {
	for _, c := range []struct {
		engine, dsn string
		fill        []string
	}{
		{"postgres", pgserver.FreshDSN(t), []string{
			`INSERT INTO vod_streams (sid, room, id, start_ms, end_ms, part, start_off, end_off, n) VALUES
				(%[1]d, 'r1', 'old', %[2]d, %[2]d + 60000, 3, 100, 200, 3), (%[3]d, 'r1', 'live', %[2]d + 70000, NULL, 3, 200, NULL, 0)`,
			`CREATE TABLE vod_comments_20261126 PARTITION OF vod_comments FOR VALUES FROM (%[4]d) TO (%[5]d)`,
			`CREATE UNIQUE INDEX vod_comments_20261126_key ON vod_comments_20261126 (sid, off_ms, hashtextextended(id, 0))`,
			`INSERT INTO vod_comments (sid, uid, off_ms, flags, id, name, content) VALUES
				(%[1]d, 7, 10, 0, 'a', 'ann', 'first'), (%[1]d, 8, 20, 1, 'b', 'bob', 'paid'), (%[1]d, 9, 30, 0, 'c', 'cy', 'gone')`,
			`INSERT INTO vod_tombstones (room, id, at_ms) VALUES ('r1', 'c', %[2]d)`,
		}},
		{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "a.db"), []string{
			`INSERT INTO vod_streams (sid, room, id, start_ms, end_ms, part, start_off, end_off, n) VALUES
				(%[1]d, 'r1', 'old', %[2]d, %[2]d + 60000, 3, 100, 200, 3), (%[3]d, 'r1', 'live', %[2]d + 70000, NULL, 3, 200, NULL, 0)`,
			`UPDATE vod_seq SET n = 2`,
			`INSERT INTO vod_comments (sid, off_ms, h, uid, flags, id, name, content) VALUES
				(%[1]d, 10, %[6]d, 7, 0, 'a', 'ann', 'first'), (%[1]d, 20, %[7]d, 8, 1, 'b', 'bob', 'paid'), (%[1]d, 30, %[8]d, 9, 0, 'c', 'cy', 'gone')`,
			`INSERT INTO vod_tombstones (room, id, at_ms) VALUES ('r1', 'c', %[2]d)`,
		}},
	} {
		t.Run(c.engine, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := Open(ctx, c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Version 1, with the data it wrote: stream keys were the
			// start in ms shifted left by 10 plus a sequence number.
			start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC).UnixMilli()
			day := start / 86400000 * 86400000
			args := []any{start<<10 | 1, start, (start+70000)<<10 | 2, day << 10, (day + 86400000) << 10,
				int64(idHash("a")), int64(idHash("b")), int64(idHash("c"))}
			exec := execOf(s)
			if err := migrateTo(ctx, s, 1); err != nil {
				t.Fatal(err)
			}
			for _, q := range c.fill {
				if strings.Contains(q, "%[") {
					q = fmt.Sprintf(q, args...)
				}
				if err := exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			old, err := s.Stream(ctx, "r1", "old")
			if err != nil {
				t.Fatal(err)
			}
			live, _ := s.Stream(ctx, "r1", "live")
			if old.SID != 1 || live.SID != 2 || old.Count != 3 || old.Live() || !live.Live() || old.EndOff != 200 || old.End != start+60000 {
				t.Errorf("streams after the migration: %+v, %+v", old, live)
			}
			cs, err := s.Comments(ctx, old, 0, SegmentMS)
			want := []Comment{{ID: "a", UID: 7, Name: "ann", Content: "first", Offset: 10}, {ID: "b", UID: 8, Name: "bob", Content: "paid", Offset: 20, Flags: FlagHigh}}
			if err != nil || !reflect.DeepEqual(cs, want) {
				t.Errorf("comments %+v, %v; want %+v", cs, err, want)
			}
			again := Batch{Rows: []Row{{SID: old.SID, Comment: want[0]}, {SID: live.SID, Comment: Comment{ID: "d", Content: "new", Offset: 5}}}}
			if n, err := s.Write(ctx, &again); err != nil || n != 1 {
				t.Errorf("write after the migration stored %d, %v; want 1", n, err)
			}
			next, err := s.StartStream(ctx, Stream{Room: "r2", ID: "next", Start: start + 90000, Part: 1, EndOff: -1})
			if err != nil || next.SID != 3 {
				t.Errorf("next stream %+v, %v; want SID 3", next, err)
			}
			if n, err := s.Prune(ctx, time.UnixMilli(start+61000)); err != nil || n != 1 {
				t.Errorf("prune %d, %v; want 1", n, err)
			}
		})
	}
}

// migrateTo brings s to schema version v.
func migrateTo(ctx context.Context, s Store, v int) error {
	switch s := s.(type) {
	case *pgStore:
		return s.migrate(ctx, v)
	case *sqliteStore:
		return s.migrate(ctx, v)
	}
	return fmt.Errorf("unknown engine %T", s)
}

func execOf(s Store) func(context.Context, string) error {
	switch s := s.(type) {
	case *pgStore:
		return func(ctx context.Context, q string) error { _, err := s.pool.Exec(ctx, q); return err }
	case *sqliteStore:
		return func(ctx context.Context, q string) error { _, err := s.db.ExecContext(ctx, q); return err }
	}
	return nil
}
