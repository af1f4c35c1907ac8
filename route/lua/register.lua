-- Adds one connection to a room and bumps its comet's count, atomically, so
-- that the sum of room:comets equals the size of room:connections. A user
-- banned from the room is not added.
-- KEYS[1] room:connections:{room}  KEYS[2] room:comets:{room}
-- KEYS[3] (optional) room:ban:{room}:<user>
-- ARGV[1] connId  ARGV[2] cometId
-- Returns the comet's count after the call (0 when the connection was a
-- member already), or -1 - ms the ban still lasts when the user is banned.
if KEYS[3] then
  local t = redis.call('PTTL', KEYS[3])
  if t ~= -2 then
    return -1 - math.max(t, 0)
  end
end
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then
  return redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
end
return 0
