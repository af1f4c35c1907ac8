-- Adds one connection to a room and bumps its comet's count, atomically, so
-- that the sum of room:comets equals the size of room:connections.
-- KEYS[1] room:connections:{room}  KEYS[2] room:comets:{room}
-- ARGV[1] connId  ARGV[2] cometId
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then
  return redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
end
return 0
