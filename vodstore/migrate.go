package vodstore

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationFS embed.FS

// migration is one schema step: files migrations/<engine>/NNN_name.sql,
// applied in order, each once; the version reached is kept in the table
// vod_schema of the database.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the steps of engine, in order.
func migrations(engine string) ([]migration, error) {
	dir := "migrations/" + engine
	files, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, f := range files {
		num, _, ok := strings.Cut(f.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(f.Name(), ".sql") {
			return nil, fmt.Errorf("migration %s/%s: want NNN_name.sql", dir, f.Name())
		}
		b, err := migrationFS.ReadFile(dir + "/" + f.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: f.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", m.name, m.version, i+1)
		}
	}
	return out, nil
}

// migrationsUpTo returns the steps of engine up to version upTo, or all
// of them when upTo is 0.
func migrationsUpTo(upTo int, engine string) ([]migration, error) {
	m, err := migrations(engine)
	if err == nil && upTo > 0 && upTo < len(m) {
		m = m[:upTo]
	}
	return m, err
}

// SchemaVersion is the schema version this build migrates to.
func SchemaVersion() int {
	m, _ := migrations("postgres")
	return len(m)
}
