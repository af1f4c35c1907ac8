-- A room's review queue (review.go). KEYS[1] room:review:{room} (hash id ->
-- item JSON), KEYS[2] room:reviewq:{room} (zset id -> accept time, ms),
-- KEYS[3] room:reviewc:{room} (zset id -> end of an approval's claim, ms),
-- KEYS[4] room:reviewk:{room} (hash retry key -> id, and '#' .. id -> its
-- retry key). ARGV[1] op; ARGV[2] now (ms); ARGV[3] the queue's TTL (ms):
-- items accepted before now - TTL are removed first, and claims that ended
-- put their items back in the queue.
--   add: ARGV[4] the most items the queue holds, then id, ts, JSON, retry
--        key quadruples. An item whose retry key names an item still held
--        (queued or claimed) is not added: its id is that item's. Returns
--        the id of each item, or -1 when the new ones do not fit (none
--        added).
--   list: ARGV[4] the most items to return. Returns their JSON, oldest first.
--   claim: ARGV[4] how long the claim lasts (ms), ARGV[5..] ids. Takes the
--        queued ones out of the queue for the caller, who writes them and
--        then removes or releases them. Returns the JSON of each claimed.
--   release: ARGV[4..] ids. Puts claimed ones back in the queue.
--   remove: ARGV[4..] ids. Returns the number removed (queued or claimed).
local h, q, c, k = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])

local function forget(id)
  redis.call('HDEL', h, id)
  local key = redis.call('HGET', k, '#' .. id)
  if key then
    redis.call('HDEL', k, '#' .. id)
    if redis.call('HGET', k, key) == id then
      redis.call('HDEL', k, key)
    end
  end
end

local function requeue(id)
  local js = redis.call('HGET', h, id)
  if js then
    redis.call('ZADD', q, cjson.decode(js).ts or now, id)
  end
end

local old = redis.call('ZRANGEBYSCORE', q, '-inf', '(' .. (now - ttl))
for _, id in ipairs(old) do
  redis.call('ZREM', q, id)
  forget(id)
end
local ended = redis.call('ZRANGEBYSCORE', c, '-inf', '(' .. now)
for _, id in ipairs(ended) do
  redis.call('ZREM', c, id)
  requeue(id)
end

local op = ARGV[1]
if op == 'add' then
  local ids, fresh = {}, 0
  for i = 5, #ARGV, 4 do
    local key = ARGV[i + 3]
    local have = key ~= '' and redis.call('HGET', k, key)
    if have and redis.call('HEXISTS', h, have) == 1 then
      ids[#ids + 1] = have
    else
      ids[#ids + 1] = false
      if redis.call('HEXISTS', h, ARGV[i]) == 0 then
        fresh = fresh + 1
      end
    end
  end
  if fresh > 0 and redis.call('ZCARD', q) + redis.call('ZCARD', c) + fresh > tonumber(ARGV[4]) then
    return -1
  end
  for j = 1, #ids do
    local i = 5 + (j - 1) * 4
    if not ids[j] then
      ids[j] = ARGV[i]
      if redis.call('HEXISTS', h, ARGV[i]) == 0 then
        redis.call('ZADD', q, ARGV[i + 1], ARGV[i])
        redis.call('HSET', h, ARGV[i], ARGV[i + 2])
        if ARGV[i + 3] ~= '' then
          redis.call('HSET', k, ARGV[i + 3], ARGV[i], '#' .. ARGV[i], ARGV[i + 3])
        end
      end
    end
  end
  for _, key in ipairs(KEYS) do
    redis.call('PEXPIRE', key, ttl)
  end
  return ids
elseif op == 'list' then
  local ids = redis.call('ZRANGE', q, 0, tonumber(ARGV[4]) - 1)
  if #ids == 0 then
    return {}
  end
  return redis.call('HMGET', h, unpack(ids))
elseif op == 'claim' then
  local out, deadline = {}, now + tonumber(ARGV[4])
  for i = 5, #ARGV do
    if redis.call('ZREM', q, ARGV[i]) == 1 then
      redis.call('ZADD', c, deadline, ARGV[i])
      out[#out + 1] = redis.call('HGET', h, ARGV[i])
    end
  end
  if #out > 0 then
    redis.call('PEXPIRE', c, ttl)
  end
  return out
elseif op == 'release' then
  for i = 4, #ARGV do
    if redis.call('ZREM', c, ARGV[i]) == 1 then
      requeue(ARGV[i])
    end
  end
  return 0
end
local removed = 0
for i = 4, #ARGV do
  local n = redis.call('ZREM', q, ARGV[i]) + redis.call('ZREM', c, ARGV[i])
  if n > 0 then
    removed = removed + 1
  end
  forget(ARGV[i])
end
return removed
