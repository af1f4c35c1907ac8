-- Claims the ids of one user's notices (or of broadcast notices) for an
-- owner and reads the user's connections, in one round trip. Every key
-- carries the user's hash tag (the broadcast tag for broadcasts).
-- KEYS[1..n] msg:processed:user:{user}:<id> (or msg:processed:all:{all}:<id>)
-- KEYS[n+1]  user:online:{user} (absent for broadcasts)
-- ARGV[1] owner  ARGV[2] claim TTL ms  ARGV[3] n
-- Returns {states, conns}: states per id (0 claimed by the caller,
-- 1 processed before, 2 claimed by another owner); conns the HGETALL of
-- user:online (connId, cometId, ...) when it is given and an id was
-- claimed, else {}.
local mine = 'claim:' .. ARGV[1]
local n = tonumber(ARGV[3])
local states = {}
local claimed = false
for i = 1, n do
  local s = 0
  if not redis.call('SET', KEYS[i], mine, 'NX', 'PX', ARGV[2]) then
    local v = redis.call('GET', KEYS[i])
    if v == 'done' then
      s = 1
    elseif v == mine then
      redis.call('PEXPIRE', KEYS[i], ARGV[2])
    else
      s = 2
    end
  end
  if s == 0 then claimed = true end
  states[i] = s
end
if claimed and #KEYS > n then
  return {states, redis.call('HGETALL', KEYS[n + 1])}
end
return {states, {}}
