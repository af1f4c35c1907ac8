-- Timeline positions: a comment keeps the position viewers saw it at in
-- the room's live timeline (NULL when job never said).
ALTER TABLE vod_comments ADD COLUMN pos INTEGER;
