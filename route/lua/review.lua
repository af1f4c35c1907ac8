-- A room's review queue (review.go). KEYS[1] room:review:{room} (hash id ->
-- item JSON), KEYS[2] room:reviewq:{room} (zset id -> accept time, ms).
-- ARGV[1] op: "add", "list" or "remove"; ARGV[2] now (ms); ARGV[3] the
-- queue's TTL (ms): items accepted before now - TTL are removed first.
--   add: ARGV[4] the most items the queue holds, then id, ts, JSON triples.
--        Returns the number added, or -1 when they do not fit (none added).
--   list: ARGV[4] the most items to return. Returns their JSON, oldest first.
--   get: ARGV[4..] ids. Returns the JSON of each (false when not queued).
--   remove: ARGV[4..] ids. Returns the number removed.
local h, q = KEYS[1], KEYS[2]
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local old = redis.call('ZRANGEBYSCORE', q, '-inf', '(' .. (now - ttl))
if #old > 0 then
  redis.call('HDEL', h, unpack(old))
  redis.call('ZREM', q, unpack(old))
end
local op = ARGV[1]
if op == 'add' then
  local n = (#ARGV - 4) / 3
  if redis.call('ZCARD', q) + n > tonumber(ARGV[4]) then
    return -1
  end
  local added = 0
  for i = 5, #ARGV, 3 do
    added = added + redis.call('ZADD', q, 'NX', ARGV[i + 1], ARGV[i])
    redis.call('HSET', h, ARGV[i], ARGV[i + 2])
  end
  redis.call('PEXPIRE', h, ttl)
  redis.call('PEXPIRE', q, ttl)
  return added
elseif op == 'list' then
  local ids = redis.call('ZRANGE', q, 0, tonumber(ARGV[4]) - 1)
  if #ids == 0 then
    return {}
  end
  return redis.call('HMGET', h, unpack(ids))
elseif op == 'get' then
  return redis.call('HMGET', h, unpack(ARGV, 4))
end
local removed = 0
for i = 4, #ARGV do
  removed = removed + redis.call('ZREM', q, ARGV[i])
  redis.call('HDEL', h, ARGV[i])
end
return removed
