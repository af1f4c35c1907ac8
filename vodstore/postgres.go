package vodstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgStore is the PostgreSQL engine.
type pgStore struct {
	pool *pgxpool.Pool

	mu     sync.Mutex     // guards blocks
	blocks map[int64]bool // partitions known to exist, by block number

	epochs epochNumbers
}

var _ Store = (*pgStore)(nil)

// migrationLock is the advisory lock key that serialises migrations and
// partition creation across processes.
const migrationLock = 0x64616e6d616b75 // "danmaku"

func openPostgres(ctx context.Context, dsn string) (*pgStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("archive dsn: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("open postgres", err)
	}
	return &pgStore{pool: pool, blocks: map[int64]bool{}}, nil
}

func (s *pgStore) Close() error { s.pool.Close(); return nil }

func (s *pgStore) Migrate(ctx context.Context) error { return s.migrate(ctx, 0) }

// migrate applies the steps up to version upTo (0: all).
func (s *pgStore) migrate(ctx context.Context, upTo int) error {
	steps, err := migrationsUpTo(upTo, "postgres")
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return wrap("migrate", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return wrap("migrate: lock", err)
	}
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS vod_schema (version integer NOT NULL)"); err != nil {
		return wrap("migrate", err)
	}
	var v int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM vod_schema").Scan(&v); err != nil {
		return wrap("migrate", err)
	}
	if v > len(steps) {
		return fmt.Errorf("migrate: the database is at schema version %d, newer than this build's %d", v, len(steps))
	}
	for _, m := range steps[v:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO vod_schema (version) VALUES ($1)", m.version); err != nil {
			return wrap("migrate", err)
		}
	}
	return wrap("migrate", tx.Commit(ctx))
}

// ensureBlock creates the comments partition of the block holding stream
// key sid, with its index, once per process.
func (s *pgStore) ensureBlock(ctx context.Context, sid int64) error {
	block := sid >> blockShift
	s.mu.Lock()
	known := s.blocks[block]
	s.mu.Unlock()
	if known {
		return nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return err
	}
	name := fmt.Sprintf("vod_comments_b%d", block)
	stmts := []string{
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s PARTITION OF vod_comments FOR VALUES FROM (%d) TO (%d)",
			name, block<<blockShift, (block+1)<<blockShift),
		fmt.Sprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s_key ON %s (sid, off_ms, hashtextextended(id, 0))", name, name),
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("create partition %s: %w", name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.blocks[block] = true
	s.mu.Unlock()
	return nil
}

const pgStreamCols = "sid, room, id, start_ms, coalesce(end_ms, 0), part, start_off, coalesce(end_off, -1), auto, n"

func scanStream(row pgx.Row) (Stream, error) {
	var st Stream
	err := row.Scan(&st.SID, &st.Room, &st.ID, &st.Start, &st.End, &st.Part, &st.StartOff, &st.EndOff, &st.Auto, &st.Count)
	return st, err
}

func (s *pgStore) StartStream(ctx context.Context, st Stream) (Stream, error) {
	got, err := scanStream(s.pool.QueryRow(ctx, `
		INSERT INTO vod_streams (room, id, start_ms, part, start_off, auto) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (room, id) DO NOTHING
		RETURNING `+pgStreamCols, st.Room, st.ID, st.Start, st.Part, st.StartOff, st.Auto))
	if errors.Is(err, pgx.ErrNoRows) {
		got, err = s.Stream(ctx, st.Room, st.ID)
	}
	if err != nil {
		return Stream{}, wrap("start stream", err)
	}
	// Also when the stream was there: a process that created it may have
	// stopped before its partition.
	return got, wrap("start stream", s.ensureBlock(ctx, got.SID))
}

func (s *pgStore) Write(ctx context.Context, b *Batch) (int, error) {
	if b.Empty() {
		return 0, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, wrap("write", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	nums, err := s.epochs.numbers(b, pgEpochSQL, pgEpochTx(ctx, tx))
	if err != nil {
		return 0, err
	}
	n, err := pgInsertRows(ctx, tx, b.Rows, nums)
	if err != nil {
		return 0, err
	}
	if len(b.Tombstones) > 0 {
		rooms, ids := make([]string, len(b.Tombstones)), make([]string, len(b.Tombstones))
		for i, t := range b.Tombstones {
			rooms[i], ids[i] = t.Room, t.ID
		}
		if _, err := tx.Exec(ctx, `INSERT INTO vod_tombstones (room, id, at_ms)
			SELECT r, i, $3 FROM unnest($1::text[], $2::text[]) AS x(r, i)
			ON CONFLICT DO NOTHING`, rooms, ids, time.Now().UnixMilli()); err != nil {
			return 0, wrap("write tombstones", err)
		}
	}
	for _, e := range b.Ends {
		if _, err := tx.Exec(ctx, `UPDATE vod_streams SET end_ms = $2, end_off = $3
			WHERE sid = $1 AND end_ms IS NULL`, e.SID, e.End, e.EndOff); err != nil {
			return 0, wrap("write end", err)
		}
	}
	for _, p := range b.Positions {
		pos, ep := stored(p.SID, &Comment{Pos: p.Pos, Epoch: p.Epoch}, nums)
		if pos == 0 {
			continue
		}
		// The flags byte is a signed "char": (flags & 3) + the epoch's
		// bits as a signed byte is the byte with both.
		if _, err := tx.Exec(ctx, `UPDATE vod_comments SET pos = $4, flags = ((flags::integer & 3) + $5)::"char"
			WHERE sid = $1 AND off_ms = $2 AND hashtextextended(id, 0) = hashtextextended($3, 0) AND id = $3
			AND (pos IS DISTINCT FROM $4 OR flags::integer <> (flags::integer & 3) + $5)`,
			int32(p.SID), clamp32(p.Offset), p.ID, int32(pos), int32(int8(ep))); err != nil {
			return 0, wrap("write positions", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, wrap("write", err)
	}
	s.epochs.learn(nums)
	return n, nil
}

var pgEpochSQL = epochSQL{
	find: `SELECT n FROM vod_epochs WHERE sid = $1 AND epoch = $2`,
	last: `SELECT coalesce(max(n), 0) FROM vod_epochs WHERE sid = $1`,
	add:  `INSERT INTO vod_epochs (sid, n, epoch) VALUES ($1, $2, $3)`,
}

func pgEpochTx(ctx context.Context, tx pgx.Tx) epochTx {
	return epochTx{
		one: func(q string, args ...any) (int64, bool, error) {
			var n int64
			err := tx.QueryRow(ctx, q, args...).Scan(&n)
			if errors.Is(err, pgx.ErrNoRows) {
				return 0, false, nil
			}
			return n, err == nil, err
		},
		exec: func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err },
	}
}

// pgInsertRows inserts rows in one statement, skipping those stored
// before, and adds the new ones to their streams' counts.
func pgInsertRows(ctx context.Context, tx pgx.Tx, rows []Row, nums map[epochKey]int) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var (
		uids                = make([]int64, len(rows))
		sids, offs, pos     = make([]int32, len(rows)), make([]int32, len(rows)), make([]int32, len(rows))
		flags               = make([]int16, len(rows))
		ids, names, content = make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
	)
	for i, r := range rows {
		p, f := stored(r.SID, &r.Comment, nums)
		// flags go to a signed "char" column.
		uids[i], sids[i], offs[i], flags[i], pos[i] = r.UID, int32(r.SID), int32(r.Offset), int16(int8(f)), int32(p)
		ids[i], names[i], content[i] = r.ID, r.Name, r.Content
	}
	var n int
	err := tx.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO vod_comments (uid, sid, off_ms, flags, id, name, content, pos)
			SELECT u, s, o, f::integer::"char", i, n, c, nullif(p, 0)
			FROM unnest($1::bigint[], $2::integer[], $3::integer[], $4::smallint[], $5::text[], $6::text[], $7::text[], $8::integer[])
				AS x(u, s, o, f, i, n, c, p)
			ON CONFLICT DO NOTHING
			RETURNING sid
		), counts AS (
			SELECT sid, count(*) AS c FROM ins GROUP BY sid
		), upd AS (
			UPDATE vod_streams s SET n = s.n + counts.c FROM counts WHERE s.sid = counts.sid
		)
		SELECT coalesce(sum(c), 0)::int FROM counts`,
		uids, sids, offs, flags, ids, names, content, pos).Scan(&n)
	return n, wrap("write comments", err)
}

func (s *pgStore) Recent(ctx context.Context, rooms []string, since int64) ([]Stream, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+pgStreamCols+` FROM vod_streams
		WHERE room = ANY($1) AND (end_ms IS NULL OR end_ms > $2) ORDER BY sid`, rooms, since)
	return collectStreams(rows, err, "recent streams")
}

func (s *pgStore) Streams(ctx context.Context, room string, limit int) ([]Stream, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+pgStreamCols+` FROM vod_streams
		WHERE room = $1 ORDER BY sid DESC LIMIT $2`, room, limit)
	return collectStreams(rows, err, "streams")
}

func collectStreams(rows pgx.Rows, err error, verb string) ([]Stream, error) {
	if err != nil {
		return nil, wrap(verb, err)
	}
	defer rows.Close()
	var out []Stream
	for rows.Next() {
		st, err := scanStream(rows)
		if err != nil {
			return nil, wrap(verb, err)
		}
		out = append(out, st)
	}
	return out, wrap(verb, rows.Err())
}

func (s *pgStore) Stream(ctx context.Context, room, id string) (Stream, error) {
	st, err := scanStream(s.pool.QueryRow(ctx, `SELECT `+pgStreamCols+` FROM vod_streams
		WHERE room = $1 AND id = $2`, room, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Stream{}, errNotFound(room, id)
	}
	return st, wrap("stream", err)
}

func (s *pgStore) Comments(ctx context.Context, st Stream, from, to int64) ([]Comment, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, uid, name, content, off_ms, flags::integer::smallint, coalesce(pos, 0) FROM vod_comments c
		WHERE sid = $1 AND off_ms >= $2 AND off_ms < $3
		AND NOT EXISTS (SELECT 1 FROM vod_tombstones t WHERE t.room = $4 AND t.id = c.id)
		ORDER BY off_ms, id`, st.SID, clamp32(from), clamp32(to), st.Room)
	if err != nil {
		return nil, wrap("comments", err)
	}
	defer rows.Close()
	cs, err := scanComments(rows)
	if err != nil || !anyEpoch(cs) {
		return cs, err
	}
	names, err := s.pool.Query(ctx, `SELECT n, epoch FROM vod_epochs WHERE sid = $1`, st.SID)
	if err != nil {
		return nil, wrap("epochs", err)
	}
	defer names.Close()
	return cs, withEpochs(names, cs)
}

func (s *pgStore) IDsSince(ctx context.Context, st Stream, from int64) ([]Comment, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, off_ms, coalesce(pos, 0) FROM vod_comments WHERE sid = $1 AND off_ms >= $2 ORDER BY off_ms`, st.SID, clamp32(from))
	if err != nil {
		return nil, wrap("ids", err)
	}
	defer rows.Close()
	return scanIDs(rows)
}

func (s *pgStore) Density(ctx context.Context, st Stream, bucketMS int64) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT off_ms / $2 AS b, count(*) FROM vod_comments c
		WHERE sid = $1 AND NOT EXISTS (SELECT 1 FROM vod_tombstones t WHERE t.room = $3 AND t.id = c.id)
		GROUP BY b ORDER BY b`, st.SID, bucketMS, st.Room)
	if err != nil {
		return nil, wrap("density", err)
	}
	defer rows.Close()
	return scanDensity(rows)
}

func (s *pgStore) Prune(ctx context.Context, before time.Time) (int, error) {
	cut := before.UnixMilli()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, wrap("prune", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return 0, wrap("prune", err)
	}
	var sids []int64
	rows, err := tx.Query(ctx, `DELETE FROM vod_streams WHERE end_ms IS NOT NULL AND end_ms < $1 RETURNING sid`, cut)
	if err == nil {
		sids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		return 0, wrap("prune streams", err)
	}
	// A block whose keys were all given out and whose streams are all
	// gone loses its partition; the rest lose the rows of the pruned
	// streams.
	var next int64
	if err := tx.QueryRow(ctx, `SELECT last_value + 1 FROM vod_stream_key`).Scan(&next); err != nil {
		return 0, wrap("prune", err)
	}
	parts, err := pgPartitions(ctx, tx)
	if err != nil {
		return 0, err
	}
	for _, p := range parts {
		var left bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM vod_streams WHERE sid >= $1 AND sid < $2)`, p.lo, p.hi).Scan(&left); err != nil {
			return 0, wrap("prune", err)
		}
		if !left && p.hi <= next {
			if _, err := tx.Exec(ctx, "DROP TABLE "+pgx.Identifier{p.name}.Sanitize()); err != nil {
				return 0, wrap("prune: drop partition", err)
			}
			s.mu.Lock()
			delete(s.blocks, p.lo>>blockShift)
			s.mu.Unlock()
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM vod_comments WHERE sid = ANY($1)`, sids); err != nil {
		return 0, wrap("prune comments", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM vod_epochs WHERE sid = ANY($1)`, sids); err != nil {
		return 0, wrap("prune epochs", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM vod_tombstones WHERE at_ms < $1`, cut); err != nil {
		return 0, wrap("prune tombstones", err)
	}
	return len(sids), wrap("prune", tx.Commit(ctx))
}

type pgPartition struct {
	name   string
	lo, hi int64
}

// pgPartitions lists the block partitions of vod_comments.
func pgPartitions(ctx context.Context, tx pgx.Tx) ([]pgPartition, error) {
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'vod_comments'::regclass`)
	if err != nil {
		return nil, wrap("partitions", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrap("partitions", err)
	}
	var out []pgPartition
	for _, n := range names {
		var block int64
		if _, err := fmt.Sscanf(n, "vod_comments_b%d", &block); err != nil {
			continue
		}
		out = append(out, pgPartition{n, block << blockShift, (block + 1) << blockShift})
	}
	return out, nil
}

func (s *pgStore) Size(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0)::bigint
		FROM pg_inherits WHERE inhparent = 'vod_comments'::regclass`).Scan(&n)
	return n, wrap("size", err)
}

// clamp32 keeps an offset within the integer column.
func clamp32(v int64) int64 {
	return min(max(v, -1<<31), 1<<31-1)
}
