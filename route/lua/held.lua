-- The comments a room's delay holds in job (held.go). KEYS[1]
-- room:held:{room} (zset id -> release time, ms), KEYS[2]
-- room:heldm:{room} (hash id -> item JSON). ARGV[1] op, ARGV[2] now (ms);
-- entries released before now are removed first.
--   add: KEYS[3..] msg:processed:{room}:<id>, one per item; ARGV[3..] id,
--        release time, JSON triples. An item whose id is marked deleted
--        ('done') is not added. Returns the number added.
--   list: ARGV[3] the most items. Returns their JSON, soonest released
--        first.
local q, h = KEYS[1], KEYS[2]
local now = tonumber(ARGV[2])
local gone = redis.call('ZRANGEBYSCORE', q, '-inf', '(' .. now)
if #gone > 0 then
  redis.call('ZREM', q, unpack(gone))
  redis.call('HDEL', h, unpack(gone))
end
if ARGV[1] == 'list' then
  local ids = redis.call('ZRANGEBYSCORE', q, now, '+inf', 'LIMIT', 0, tonumber(ARGV[3]))
  if #ids == 0 then
    return {}
  end
  return redis.call('HMGET', h, unpack(ids))
end
local added, last = 0, now
for j = 3, #KEYS do
  local i = 3 + (j - 3) * 3
  if redis.call('GET', KEYS[j]) ~= 'done' then
    local at = tonumber(ARGV[i + 1])
    added = added + redis.call('ZADD', q, at, ARGV[i])
    redis.call('HSET', h, ARGV[i], ARGV[i + 2])
    last = math.max(last, at)
  end
end
if added > 0 then
  redis.call('PEXPIRE', q, last - now + 60000)
  redis.call('PEXPIRE', h, last - now + 60000)
end
return added
