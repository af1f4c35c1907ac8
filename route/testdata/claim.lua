-- Claims message ids of one room for delivery. For each key:
--   0 claimed now (or already claimed by this owner: the claim is refreshed)
--   1 already processed (delivered before)
--   2 claimed by another owner that has not finished yet
-- KEYS[i] msg:processed:{room}:{msgId}  ARGV[1] owner  ARGV[2] claim TTL ms
local mine = 'claim:' .. ARGV[1]
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('SET', k, mine, 'NX', 'PX', ARGV[2]) then
    out[i] = 0
  else
    local v = redis.call('GET', k)
    if v == 'done' then
      out[i] = 1
    elseif v == mine then
      redis.call('PEXPIRE', k, ARGV[2])
      out[i] = 0
    else
      out[i] = 2
    end
  end
end
return out
