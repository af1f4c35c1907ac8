package vodstore_test

import (
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
