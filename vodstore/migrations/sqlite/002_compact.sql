-- Stream keys (sid) become plain sequence numbers instead of the start
-- time shifted left by 10: a small integer takes 1 to 3 bytes in every
-- comment's key where the old one took 7.
CREATE TEMP TABLE vod_renumber AS
	SELECT sid AS old, row_number() OVER (ORDER BY sid) AS new FROM vod_streams;
UPDATE vod_comments SET sid = (SELECT new FROM vod_renumber WHERE old = vod_comments.sid);
UPDATE vod_streams SET sid = (SELECT new FROM vod_renumber WHERE old = vod_streams.sid);
UPDATE vod_seq SET n = (SELECT count(*) FROM vod_streams);
DROP TABLE vod_renumber;
