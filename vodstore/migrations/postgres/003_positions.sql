-- Timeline positions. A comment keeps the position viewers saw it at in
-- the room's live timeline (pos; NULL when job never said, say a message
-- it dropped). The flags become a one-byte "char" so that the row of a
-- 30-character comment stays 104 bytes with its header: after uid, sid and
-- off_ms (16 bytes), the flags byte and the three short texts, the 4-byte
-- position fills what alignment to 8 bytes left free.
ALTER TABLE vod_comments ALTER COLUMN flags TYPE "char" USING flags::integer::"char";
ALTER TABLE vod_comments ADD COLUMN pos integer;
