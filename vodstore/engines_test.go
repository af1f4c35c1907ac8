package vodstore_test

import (
	"context"
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
