package vodstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/danmaku/danmaku/internal/testkit/pgserver"
	"github.com/danmaku/danmaku/internal/testkit/vodstoretest"
	"github.com/danmaku/danmaku/vodstore"
)

var (
	pg    *pgserver.Server
	dbSeq atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pg != nil {
		pg.Remove()
	}
	os.Exit(code)
}

// postgres returns the package's PostgreSQL server, started on first use.
func postgres(t *testing.T) *pgserver.Server {
	t.Helper()
	if pg == nil {
		s, err := pgserver.New()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			s.Remove()
			t.Fatal(err)
		}
		pg = s
	}
	return pg
}

// OpenPostgres opens a store on a fresh database of the package's server.
func openPostgres(t *testing.T) vodstore.Store {
	dsn := postgres(t).DSN(t, fmt.Sprintf("vod%d", dbSeq.Add(1)))
	return mustOpen(t, dsn)
}

func openSQLite(t *testing.T) vodstore.Store {
	return mustOpen(t, "sqlite:"+filepath.Join(t.TempDir(), "sub", "archive.db"))
}

func mustOpen(t *testing.T, dsn string) vodstore.Store {
	t.Helper()
	s, err := vodstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPostgres(t *testing.T) { vodstoretest.Run(t, openPostgres) }

func TestSQLite(t *testing.T) { vodstoretest.Run(t, openSQLite) }
