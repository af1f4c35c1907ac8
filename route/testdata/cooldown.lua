-- Opens a room's cooldown window if none runs. Returns 0 when this caller
-- opened it, otherwise the milliseconds the running window still lasts.
-- KEYS[1] room:cooldown:{room}  ARGV[1] window ms
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return 0
end
local t = redis.call('PTTL', KEYS[1])
if t < 0 then
  -- A key without expiry would block the room forever: give it one.
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return tonumber(ARGV[1])
end
if t == 0 then return 1 end
return t
