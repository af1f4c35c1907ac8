-- A room's deletion log with the epoch it belongs to.
-- KEYS[1] room:timeline:{room}  KEYS[2] room:dels:{room}
-- Returns {epoch, dels, ids}: dels is the number of ids deleted in the
-- epoch, ids the newest of them kept, oldest first ('', 0 and none for a
-- room without a timeline).
local tl = redis.call('HMGET', KEYS[1], 'epoch', 'dels')
if not tl[1] then
  return {'', 0, {}}
end
return {tl[1], tonumber(tl[2]) or 0, redis.call('LRANGE', KEYS[2], 0, -1)}
