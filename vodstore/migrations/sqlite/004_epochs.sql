-- Timeline epochs. A position counts from 1 again when its room's
-- timeline starts over (a new epoch: Redis emptied, the room silent past
-- its history's TTL), so a comment keeps the epoch of its position too.
-- The epochs a stream's comments were positioned in are numbered 1, 2...
-- per stream here, and a comment keeps that number in bits 2-7 of its
-- flags (bits 0-1 are the flags; 0 there: no epoch known), as on
-- PostgreSQL.
CREATE TABLE vod_epochs (
	sid   INTEGER NOT NULL,
	n     INTEGER NOT NULL,
	epoch TEXT    NOT NULL,
	PRIMARY KEY (sid, n),
	UNIQUE (sid, epoch)
) WITHOUT ROWID;
