-- Compact comments. A stream's key (sid) becomes a 4-byte number from a
-- sequence instead of 8 bytes of start time: the comment row loses 8
-- bytes to alignment, and the index entry (sid, off_ms, hash of id) is 24
-- bytes instead of 32, narrow enough for PostgreSQL's B-tree to split a
-- stream's last leaf page 90/10 instead of 50/50 while a stream appends
-- (its "split after new item" rule takes entries of at most two int8s),
-- so leaf pages stay nearly full. Comments are partitioned by blocks of
-- 65,536 stream keys (vod_comments_bN holds sids [N<<16, (N+1)<<16)):
-- keys grow with time, so retention still drops whole partitions.
CREATE SEQUENCE vod_stream_key AS integer;

ALTER TABLE vod_streams ADD COLUMN k integer;
UPDATE vod_streams s SET k = x.rn
	FROM (SELECT sid, row_number() OVER (ORDER BY sid) AS rn FROM vod_streams) x
	WHERE s.sid = x.sid;
SELECT setval('vod_stream_key', coalesce((SELECT max(k) FROM vod_streams), 0) + 1, false);

ALTER TABLE vod_comments RENAME TO vod_comments_v1;
CREATE TABLE vod_comments (
	uid     bigint   NOT NULL,
	sid     integer  NOT NULL,
	off_ms  integer  NOT NULL,
	flags   smallint NOT NULL,
	id      text     NOT NULL,
	name    text     NOT NULL,
	content text     NOT NULL
) PARTITION BY RANGE (sid);

DO $$
DECLARE b integer;
BEGIN
	FOR b IN SELECT DISTINCT k >> 16 FROM vod_streams LOOP
		EXECUTE format('CREATE TABLE vod_comments_b%s PARTITION OF vod_comments FOR VALUES FROM (%s) TO (%s)',
			b, b::bigint << 16, (b::bigint + 1) << 16);
		EXECUTE format('CREATE UNIQUE INDEX vod_comments_b%s_key ON vod_comments_b%s (sid, off_ms, hashtextextended(id, 0))', b, b);
	END LOOP;
END $$;

INSERT INTO vod_comments (uid, sid, off_ms, flags, id, name, content)
	SELECT c.uid, s.k, c.off_ms, c.flags, c.id, c.name, c.content
	FROM vod_comments_v1 c JOIN vod_streams s ON s.sid = c.sid
	ORDER BY s.k, c.off_ms, hashtextextended(c.id, 0);
DROP TABLE vod_comments_v1;

ALTER TABLE vod_streams DROP COLUMN sid;
ALTER TABLE vod_streams RENAME COLUMN k TO sid;
ALTER TABLE vod_streams ALTER COLUMN sid SET DEFAULT nextval('vod_stream_key'), ALTER COLUMN sid SET NOT NULL;
ALTER SEQUENCE vod_stream_key OWNED BY vod_streams.sid;
ALTER TABLE vod_streams ADD PRIMARY KEY (sid);
CREATE INDEX vod_streams_room ON vod_streams (room, sid DESC);
DROP SEQUENCE vod_stream_seq;
