-- Removes one connection of one comet from a room and lowers the comet's
-- count by what was actually removed (idempotent); a count that reaches
-- zero loses its field, so no empty fields stay behind.
-- KEYS[1] room:connections:{room}  KEYS[2] room:comets:{room}
-- ARGV[1] cometId  ARGV[2] connId
local removed = redis.call('SREM', KEYS[1], ARGV[2])
local left
if removed == 1 then
  left = redis.call('HINCRBY', KEYS[2], ARGV[1], -1)
else
  left = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
end
if left <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
end
return removed
