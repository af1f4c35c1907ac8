-- The guards of one room batch in one round trip: lock check, cooldown,
-- dedup claims, lock acquisition and the route lookup.
-- KEYS[1] lock:broadcast:{room}  KEYS[2] room:cooldown:{room}
-- KEYS[3] room:comets:{room}     KEYS[4..] msg:processed:{room}:{msgId}
-- ARGV[1] window ms (0: no cooldown check)  ARGV[2] owner  ARGV[3] claim TTL ms
-- ARGV[4] lock token  ARGV[5] lock TTL ms
-- Returns {status, ms, states, comets}:
--   status 0: locked by the caller; states per id; comets = HGETALL room:comets
--   status 1: window still running for ms (nothing claimed, no lock)
--   status 2: lock held by another owner (nothing claimed, window untouched)
--   status 3: no id claimable; states per id (no lock taken)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {2, 0, {}, {}}
end
local window = tonumber(ARGV[1])
if window > 0 and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', window) then
  local t = redis.call('PTTL', KEYS[2])
  if t < 0 then
    redis.call('PEXPIRE', KEYS[2], window)
    t = window
  end
  return {1, math.max(t, 1), {}, {}}
end
local mine = 'claim:' .. ARGV[2]
local states = {}
local claimed = 0
for i = 4, #KEYS do
  local k = KEYS[i]
  local s
  if redis.call('SET', k, mine, 'NX', 'PX', ARGV[3]) then
    s = 0
  else
    local v = redis.call('GET', k)
    if v == 'done' then
      s = 1
    elseif v == mine then
      redis.call('PEXPIRE', k, ARGV[3])
      s = 0
    else
      s = 2
    end
  end
  if s == 0 then claimed = claimed + 1 end
  states[#states + 1] = s
end
if claimed == 0 then
  return {3, 0, states, {}}
end
redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
return {0, 0, states, redis.call('HGETALL', KEYS[3])}
