package vodstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// sqliteStore is the embedded engine: one database file (WAL mode), for
// the all-in-one binary and development.
type sqliteStore struct {
	db *sql.DB

	mu    sync.Mutex // guards stmts
	stmts map[string]*sql.Stmt

	epochs epochNumbers
}

// sqliteConns is how many connections the store keeps open and idle: a
// connection costs opening the file and reading the schema, so reads
// from many requests at once do not close and open them again.
const sqliteConns = 8

var _ Store = (*sqliteStore)(nil)

func openSQLite(ctx context.Context, path string) (*sqliteStore, error) {
	if path == "" {
		return nil, errors.New("archive dsn: sqlite: needs a file path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, wrap("open sqlite", err)
		}
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(OFF)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, wrap("open sqlite", err)
	}
	db.SetMaxOpenConns(sqliteConns)
	db.SetMaxIdleConns(sqliteConns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, wrap("open sqlite", err)
	}
	return &sqliteStore{db: db, stmts: map[string]*sql.Stmt{}}, nil
}

func (s *sqliteStore) Close() error {
	s.mu.Lock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.mu.Unlock()
	return s.db.Close()
}

// query runs one of the reads with a statement prepared once (per
// connection, by database/sql) instead of parsing its SQL every time.
func (s *sqliteStore) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *sqliteStore) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stmts[q]; st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	s.stmts[q] = st
	return st, nil
}

func (s *sqliteStore) Migrate(ctx context.Context) error { return s.migrate(ctx, 0) }

// migrate applies the steps up to version upTo (0: all).
func (s *sqliteStore) migrate(ctx context.Context, upTo int) error {
	steps, err := migrationsUpTo(upTo, "sqlite")
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return wrap("migrate", err)
	}
	defer conn.Close()
	// BEGIN IMMEDIATE takes the write lock at once: two processes
	// migrating one file run one after the other.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return wrap("migrate", err)
	}
	done := false
	defer func() {
		if !done {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS vod_schema (version INTEGER NOT NULL)"); err != nil {
		return wrap("migrate", err)
	}
	var v int
	if err := conn.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM vod_schema").Scan(&v); err != nil {
		return wrap("migrate", err)
	}
	if v > len(steps) {
		return fmt.Errorf("migrate: the database is at schema version %d, newer than this build's %d", v, len(steps))
	}
	for _, m := range steps[v:] {
		if _, err := conn.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO vod_schema (version) VALUES (?)", m.version); err != nil {
			return wrap("migrate", err)
		}
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	done = err == nil
	return wrap("migrate", err)
}

const sqliteStreamCols = "sid, room, id, start_ms, coalesce(end_ms, 0), part, start_off, coalesce(end_off, -1), auto, n"

type scanner interface{ Scan(...any) error }

func scanSQLiteStream(row scanner) (Stream, error) {
	var st Stream
	err := row.Scan(&st.SID, &st.Room, &st.ID, &st.Start, &st.End, &st.Part, &st.StartOff, &st.EndOff, &st.Auto, &st.Count)
	return st, err
}

func (s *sqliteStore) StartStream(ctx context.Context, st Stream) (Stream, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Stream{}, wrap("start stream", err)
	}
	defer tx.Rollback()
	got, err := scanSQLiteStream(tx.QueryRowContext(ctx, `SELECT `+sqliteStreamCols+` FROM vod_streams WHERE room = ? AND id = ?`, st.Room, st.ID))
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Stream{}, wrap("start stream", err)
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, `UPDATE vod_seq SET n = n + 1 RETURNING n`).Scan(&seq); err != nil {
		return Stream{}, wrap("start stream", err)
	}
	got, err = scanSQLiteStream(tx.QueryRowContext(ctx, `
		INSERT INTO vod_streams (sid, room, id, start_ms, part, start_off, auto) VALUES (?, ?, ?, ?, ?, ?, ?)
		RETURNING `+sqliteStreamCols, seq, st.Room, st.ID, st.Start, st.Part, st.StartOff, st.Auto))
	if err != nil {
		return Stream{}, wrap("start stream", err)
	}
	return got, wrap("start stream", tx.Commit())
}

func (s *sqliteStore) Write(ctx context.Context, b *Batch) (int, error) {
	if b.Empty() {
		return 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, wrap("write", err)
	}
	defer tx.Rollback()
	nums, err := s.epochs.numbers(b, sqliteEpochSQL, sqliteEpochTx(ctx, tx))
	if err != nil {
		return 0, err
	}
	n, err := s.insertRows(ctx, tx, b.Rows, nums)
	if err != nil {
		return 0, err
	}
	now := time.Now().UnixMilli()
	for _, t := range b.Tombstones {
		if _, err := tx.ExecContext(ctx, `INSERT INTO vod_tombstones (room, id, at_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, t.Room, t.ID, now); err != nil {
			return 0, wrap("write tombstones", err)
		}
	}
	for _, e := range b.Ends {
		if _, err := tx.ExecContext(ctx, `UPDATE vod_streams SET end_ms = ?, end_off = ? WHERE sid = ? AND end_ms IS NULL`, e.End, e.EndOff, e.SID); err != nil {
			return 0, wrap("write end", err)
		}
	}
	for _, p := range b.Positions {
		pos, ep := stored(p.SID, &Comment{Pos: p.Pos, Epoch: p.Epoch}, nums)
		if pos == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE vod_comments SET pos = ?, flags = (flags & 3) | ? WHERE sid = ? AND off_ms = ? AND h = ? AND id = ?`,
			pos, ep, p.SID, p.Offset, int64(idHash(p.ID)), p.ID); err != nil {
			return 0, wrap("write positions", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, wrap("write", err)
	}
	s.epochs.learn(nums)
	return n, nil
}

var sqliteEpochSQL = epochSQL{
	find: `SELECT n FROM vod_epochs WHERE sid = ? AND epoch = ?`,
	last: `SELECT coalesce(max(n), 0) FROM vod_epochs WHERE sid = ?`,
	add:  `INSERT INTO vod_epochs (sid, n, epoch) VALUES (?, ?, ?)`,
}

func sqliteEpochTx(ctx context.Context, tx *sql.Tx) epochTx {
	return epochTx{
		one: func(q string, args ...any) (int64, bool, error) {
			var n int64
			err := tx.QueryRowContext(ctx, q, args...).Scan(&n)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, false, nil
			}
			return n, err == nil, err
		},
		exec: func(q string, args ...any) error { _, err := tx.ExecContext(ctx, q, args...); return err },
	}
}

// epochNames returns the epochs of stream sid by number, when cs (as
// scanned) name any, and gives cs their flags and epochs.
func (s *sqliteStore) epochNames(ctx context.Context, sid int64, cs []Comment) error {
	rows, err := s.query(ctx, `SELECT n, epoch FROM vod_epochs WHERE sid = ?`, sid)
	if err != nil {
		return wrap("epochs", err)
	}
	defer rows.Close()
	return withEpochs(rows, cs)
}

// sqliteChunks are the row counts of the insert statements, largest
// first: a write's rows go in as many statements of the largest as fit,
// then of the smaller ones, each statement prepared once. A statement per
// row cost a pass through database/sql and the driver (which starts a
// goroutine to watch the context of every statement) per comment.
var sqliteChunks = [...]int{256, 32, 4, 1}

// sqliteInserts holds the insert statement of each chunk size: it skips
// the rows stored before and returns the stream of each new one.
var sqliteInserts = func() map[int]string {
	out := map[int]string{}
	for _, n := range sqliteChunks {
		q := strings.Repeat(",(?, ?, ?, ?, ?, ?, ?, ?, nullif(?, 0))", n)
		out[n] = "INSERT INTO vod_comments (sid, off_ms, h, uid, flags, id, name, content, pos) VALUES " + q[1:] +
			" ON CONFLICT DO NOTHING RETURNING sid"
	}
	return out
}()

// insertRows inserts rows, skipping those stored before, and adds the
// new ones to their streams' counts.
func (s *sqliteStore) insertRows(ctx context.Context, tx *sql.Tx, rows []Row, nums map[epochKey]int) (int, error) {
	added := map[int64]int64{}
	total := 0
	args := make([]any, 0, 9*min(len(rows), sqliteChunks[0]))
	for len(rows) > 0 {
		n := sqliteChunks[len(sqliteChunks)-1]
		for _, c := range sqliteChunks {
			if c <= len(rows) {
				n = c
				break
			}
		}
		st, err := s.stmt(ctx, sqliteInserts[n])
		if err != nil {
			return 0, wrap("write comments", err)
		}
		args = args[:0]
		for _, r := range rows[:n] {
			pos, flags := stored(r.SID, &r.Comment, nums)
			args = append(args, r.SID, r.Offset, int64(idHash(r.ID)), r.UID, flags, r.ID, r.Name, r.Content, pos)
		}
		rows = rows[n:]
		res, err := tx.StmtContext(ctx, st).QueryContext(ctx, args...)
		if err != nil {
			return 0, wrap("write comments", err)
		}
		for res.Next() {
			var sid int64
			if err := res.Scan(&sid); err != nil {
				res.Close()
				return 0, wrap("write comments", err)
			}
			added[sid]++
			total++
		}
		if err := res.Close(); err != nil {
			return 0, wrap("write comments", err)
		}
		if err := res.Err(); err != nil {
			return 0, wrap("write comments", err)
		}
	}
	for sid, k := range added {
		if _, err := tx.ExecContext(ctx, `UPDATE vod_streams SET n = n + ? WHERE sid = ?`, k, sid); err != nil {
			return 0, wrap("write counts", err)
		}
	}
	return total, nil
}

func (s *sqliteStore) Recent(ctx context.Context, rooms []string, since int64) ([]Stream, error) {
	var out []Stream
	for _, room := range rooms {
		rows, err := s.db.QueryContext(ctx, `SELECT `+sqliteStreamCols+` FROM vod_streams
			WHERE room = ? AND (end_ms IS NULL OR end_ms > ?) ORDER BY sid`, room, since)
		got, err := collectSQLiteStreams(rows, err, "recent streams")
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

func (s *sqliteStore) Streams(ctx context.Context, room string, limit int) ([]Stream, error) {
	rows, err := s.query(ctx, `SELECT `+sqliteStreamCols+` FROM vod_streams
		WHERE room = ? ORDER BY sid DESC LIMIT ?`, room, limit)
	return collectSQLiteStreams(rows, err, "streams")
}

func collectSQLiteStreams(rows *sql.Rows, err error, verb string) ([]Stream, error) {
	if err != nil {
		return nil, wrap(verb, err)
	}
	defer rows.Close()
	var out []Stream
	for rows.Next() {
		st, err := scanSQLiteStream(rows)
		if err != nil {
			return nil, wrap(verb, err)
		}
		out = append(out, st)
	}
	return out, wrap(verb, rows.Err())
}

func (s *sqliteStore) Stream(ctx context.Context, room, id string) (Stream, error) {
	q, err := s.stmt(ctx, `SELECT `+sqliteStreamCols+` FROM vod_streams WHERE room = ? AND id = ?`)
	if err != nil {
		return Stream{}, wrap("stream", err)
	}
	st, err := scanSQLiteStream(q.QueryRowContext(ctx, room, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Stream{}, errNotFound(room, id)
	}
	return st, wrap("stream", err)
}

func (s *sqliteStore) Comments(ctx context.Context, st Stream, from, to int64) ([]Comment, error) {
	rows, err := s.query(ctx, `SELECT id, uid, name, content, off_ms, flags, coalesce(pos, 0) FROM vod_comments c
		WHERE sid = ? AND off_ms >= ? AND off_ms < ?
		AND NOT EXISTS (SELECT 1 FROM vod_tombstones t WHERE t.room = ? AND t.id = c.id)
		ORDER BY off_ms, id`, st.SID, from, to, st.Room)
	if err != nil {
		return nil, wrap("comments", err)
	}
	defer rows.Close()
	cs, err := scanComments(rows)
	if err != nil || !anyEpoch(cs) {
		return cs, err
	}
	return cs, s.epochNames(ctx, st.SID, cs)
}

func (s *sqliteStore) IDsSince(ctx context.Context, st Stream, from int64) ([]Comment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, off_ms, coalesce(pos, 0) FROM vod_comments WHERE sid = ? AND off_ms >= ? ORDER BY off_ms`, st.SID, from)
	if err != nil {
		return nil, wrap("ids", err)
	}
	defer rows.Close()
	return scanIDs(rows)
}

func (s *sqliteStore) Density(ctx context.Context, st Stream, bucketMS int64) ([]int64, error) {
	rows, err := s.query(ctx, `SELECT off_ms / ? AS b, count(*) FROM vod_comments c
		WHERE sid = ? AND NOT EXISTS (SELECT 1 FROM vod_tombstones t WHERE t.room = ? AND t.id = c.id)
		GROUP BY b ORDER BY b`, bucketMS, st.SID, st.Room)
	if err != nil {
		return nil, wrap("density", err)
	}
	defer rows.Close()
	return scanDensity(rows)
}

func (s *sqliteStore) Prune(ctx context.Context, before time.Time) (int, error) {
	cut := before.UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, wrap("prune", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM vod_epochs WHERE sid IN
		(SELECT sid FROM vod_streams WHERE end_ms IS NOT NULL AND end_ms < ?)`, cut); err != nil {
		return 0, wrap("prune epochs", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM vod_comments WHERE sid IN
		(SELECT sid FROM vod_streams WHERE end_ms IS NOT NULL AND end_ms < ?)`, cut); err != nil {
		return 0, wrap("prune comments", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM vod_streams WHERE end_ms IS NOT NULL AND end_ms < ?`, cut)
	if err != nil {
		return 0, wrap("prune streams", err)
	}
	n, _ := res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM vod_tombstones WHERE at_ms < ?`, cut); err != nil {
		return 0, wrap("prune tombstones", err)
	}
	return int(n), wrap("prune", tx.Commit())
}

func (s *sqliteStore) Size(ctx context.Context) (int64, error) {
	// The comments table is one B-tree (WITHOUT ROWID): its pages are
	// the table and its index.
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'vod_comments'`).Scan(&n)
	return n, wrap("size", err)
}
