-- Deletes this owner's claims (delivery failed; let a retry proceed now).
-- KEYS[i] msg:processed:{room}:{msgId}  ARGV[1] owner
local mine = 'claim:' .. ARGV[1]
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call('GET', k) == mine then
    n = n + redis.call('DEL', k)
  end
end
return n
