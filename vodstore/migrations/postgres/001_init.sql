-- Streams: a room's live sessions. sid orders them by start (start in ms
-- shifted left by 10, plus a sequence number) and is the partition key
-- of the comments.
CREATE SEQUENCE vod_stream_seq;
CREATE TABLE vod_streams (
	sid       bigint  PRIMARY KEY,
	room      text    NOT NULL,
	id        text    NOT NULL,
	start_ms  bigint  NOT NULL,
	end_ms    bigint,
	part      integer NOT NULL,
	start_off bigint  NOT NULL,
	end_off   bigint,
	auto      boolean NOT NULL DEFAULT false,
	n         bigint  NOT NULL DEFAULT 0,
	UNIQUE (room, id)
);
CREATE INDEX vod_streams_room ON vod_streams (room, sid DESC);
CREATE INDEX vod_streams_live ON vod_streams (room) WHERE end_ms IS NULL;

-- Comments, partitioned by day of their stream's start. Columns are laid
-- out fixed-width first (no padding), the texts last. Each partition has
-- one unique index, (sid, off_ms, hash of id): it serves segment and
-- density reads and keeps a redelivered record from being stored twice.
CREATE TABLE vod_comments (
	sid     bigint   NOT NULL,
	uid     bigint   NOT NULL,
	off_ms  integer  NOT NULL,
	flags   smallint NOT NULL,
	id      text     NOT NULL,
	name    text     NOT NULL,
	content text     NOT NULL
) PARTITION BY RANGE (sid);

-- Messages hidden from every read: deleted or shadow-hidden by a moderator.
CREATE TABLE vod_tombstones (
	room  text   NOT NULL,
	id    text   NOT NULL,
	at_ms bigint NOT NULL,
	PRIMARY KEY (room, id)
);
