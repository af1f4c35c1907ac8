-- Removes connections of one comet from a room and lowers the comet's count
-- by the number actually removed (idempotent); a count that reaches zero
-- loses its field, so no empty fields stay behind.
-- KEYS[1] room:connections:{room}  KEYS[2] room:comets:{room}
-- ARGV[1] cometId  ARGV[2] "1" to drop the comet's field whatever its count
-- ARGV[3..] connIds
local removed = 0
for i = 3, #ARGV do
  removed = removed + redis.call('SREM', KEYS[1], ARGV[i])
end
local left = 0
if removed > 0 then
  left = redis.call('HINCRBY', KEYS[2], ARGV[1], -removed)
else
  left = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
end
if left <= 0 or ARGV[2] == '1' then
  redis.call('HDEL', KEYS[2], ARGV[1])
end
return removed
