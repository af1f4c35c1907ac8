CREATE TABLE vod_seq (n INTEGER NOT NULL);
INSERT INTO vod_seq (n) VALUES (0);
CREATE TABLE vod_streams (
	sid       INTEGER PRIMARY KEY,
	room      TEXT    NOT NULL,
	id        TEXT    NOT NULL,
	start_ms  INTEGER NOT NULL,
	end_ms    INTEGER,
	part      INTEGER NOT NULL,
	start_off INTEGER NOT NULL,
	end_off   INTEGER,
	auto      INTEGER NOT NULL DEFAULT 0,
	n         INTEGER NOT NULL DEFAULT 0,
	UNIQUE (room, id)
);
CREATE INDEX vod_streams_room ON vod_streams (room, sid DESC);

-- One B-tree per comment: the key (sid, off_ms, h) serves reads and
-- keeps a redelivered record from being stored twice (h: a 64-bit hash of
-- the id).
CREATE TABLE vod_comments (
	sid     INTEGER NOT NULL,
	off_ms  INTEGER NOT NULL,
	h       INTEGER NOT NULL,
	uid     INTEGER NOT NULL,
	flags   INTEGER NOT NULL,
	id      TEXT    NOT NULL,
	name    TEXT    NOT NULL,
	content TEXT    NOT NULL,
	PRIMARY KEY (sid, off_ms, h)
) WITHOUT ROWID;

CREATE TABLE vod_tombstones (
	room  TEXT    NOT NULL,
	id    TEXT    NOT NULL,
	at_ms INTEGER NOT NULL,
	PRIMARY KEY (room, id)
) WITHOUT ROWID;
