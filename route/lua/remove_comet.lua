-- Removes connections of a comet that is going away from a room, and the
-- comet's field in the room's counts whatever it says: the comet holds no
-- viewer of the room afterwards. Returns the number of connections removed.
-- KEYS[1] room:connections:{room}  KEYS[2] room:comets:{room}
-- ARGV[1] cometId  ARGV[2..] connIds
local removed = 0
for i = 2, #ARGV do
  removed = removed + redis.call('SREM', KEYS[1], ARGV[i])
end
redis.call('HDEL', KEYS[2], ARGV[1])
return removed
