package vodstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit/pgserver"
	"github.com/danmaku/danmaku/internal/testkit/vodstoretest"
	"github.com/danmaku/danmaku/vodstore"
)

func TestMain(m *testing.M) { os.Exit(pgserver.Run(m)) }

func openPostgres(t *testing.T) vodstore.Store { return mustOpen(t, pgserver.FreshDSN(t)) }

func openSQLite(t *testing.T) vodstore.Store {
	return mustOpen(t, "sqlite:"+filepath.Join(t.TempDir(), "sub", "archive.db"))
}

func mustOpen(t *testing.T, dsn string) vodstore.Store { return vodstoretest.MustOpen(t, dsn) }

func TestPostgres(t *testing.T) { vodstoretest.Run(t, openPostgres) }

func TestSQLite(t *testing.T) { vodstoretest.Run(t, openSQLite) }

// The bytes a comment of 30 characters takes on disk, table and index
// together, its timeline position and epoch included (two epochs per
// stream), stay within the archive's budget: 150 on PostgreSQL. 50,000
// comments of 20 streams written in batches of 1,000, interleaved as the
// archive writes a partition's rooms.
func TestBytesPerComment(t *testing.T) {
	for _, c := range []struct {
		name  string
		open  func(*testing.T) vodstore.Store
		limit float64
	}{{"postgres", openPostgres, 150}, {"sqlite", openSQLite, 110}} {
		t.Run(c.name, func(t *testing.T) {
			s := c.open(t)
			ctx := context.Background()
			var sts []vodstore.Stream
			for i := range 20 {
				st, err := s.StartStream(ctx, vodstore.Stream{Room: fmt.Sprint("room", i), ID: "s", Start: 1795658710062, Part: 1, EndOff: -1})
				if err != nil {
					t.Fatal(err)
				}
				sts = append(sts, st)
			}
			const n = 50000
			for i := 0; i < n; i += 1000 {
				var b vodstore.Batch
				for j := i; j < i+1000; j++ {
					b.Rows = append(b.Rows, vodstore.Row{SID: sts[j%20].SID, Comment: vodstore.Comment{ID: fmt.Sprintf("06h%013d", j),
						UID: int64(1000 + j%5000), Name: fmt.Sprint("viewer", j%5000), Content: fmt.Sprintf("comment number %014d!", j), Offset: int64(j / 10),
						Pos: int64(j/20 + 1), Epoch: fmt.Sprintf("%016x", uint64(0x9e3779b97f4a7c15)+uint64(j/25000))}})
				}
				if _, err := s.Write(ctx, &b); err != nil {
					t.Fatal(err)
				}
			}
			size, err := s.Size(ctx)
			if err != nil {
				t.Fatal(err)
			}
			per := float64(size) / n
			t.Logf("%s: %.1f bytes per comment (%d bytes for %d)", c.name, per, size, n)
			if per > c.limit {
				t.Errorf("%.1f bytes per comment, over %v", per, c.limit)
			}
		})
	}
}
