-- A room's deletion log with the epoch it belongs to, from a given number
-- on. The ids deleted in an epoch are numbered 1, 2, 3... and the log keeps
-- the newest of them, so its last entry is number dels.
-- KEYS[1] room:timeline:{room}  KEYS[2] room:dels:{room}
-- ARGV[1] after: the ids numbered after it are returned
-- Returns {epoch, dels, ids}: dels is the number of ids deleted in the
-- epoch, ids those numbered after ARGV[1] that the log still holds, oldest
-- first ('', 0 and none for a room without a timeline).
local tl = redis.call('HMGET', KEYS[1], 'epoch', 'dels')
if not tl[1] then
  return {'', 0, {}}
end
local dels = tonumber(tl[2]) or 0
local n = dels - tonumber(ARGV[1])
if n <= 0 then
  return {tl[1], dels, {}}
end
return {tl[1], dels, redis.call('LRANGE', KEYS[2], -n, -1)}
