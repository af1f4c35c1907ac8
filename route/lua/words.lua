-- An edited blocked-word list (words.go): the global one (admin:words) or
-- a room's (room:state:{room}), as fields 'word.' .. word -> mode, with
-- 'wordn' (how many) and 'wordver' (changed on every edit). KEYS[1] the
-- list's hash. ARGV[1] op:
--   add: ARGV[2] mode, ARGV[3] the most words the list holds, ARGV[4..]
--        words (a word listed already takes the mode). Returns the list's
--        size after, or -1 when the new words do not fit (none added).
--   remove: ARGV[2..] words. Returns the number removed.
--   read: ARGV[2] the version the caller has. Returns {version} when it
--        is the list's, else {version, HGETALL}.
local key, op = KEYS[1], ARGV[1]
if op == 'read' then
  local v = redis.call('HGET', key, 'wordver') or '0'
  if v == ARGV[2] then
    return {v}
  end
  return {v, redis.call('HGETALL', key)}
end
local n = tonumber(redis.call('HGET', key, 'wordn') or '0')
if op == 'add' then
  local fresh = 0
  for i = 4, #ARGV do
    if redis.call('HEXISTS', key, 'word.' .. ARGV[i]) == 0 then
      fresh = fresh + 1
    end
  end
  if n + fresh > tonumber(ARGV[3]) then
    return -1
  end
  for i = 4, #ARGV do
    redis.call('HSET', key, 'word.' .. ARGV[i], ARGV[2])
  end
  redis.call('HSET', key, 'wordn', n + fresh)
  redis.call('HINCRBY', key, 'wordver', 1)
  return n + fresh
end
local removed = 0
for i = 2, #ARGV do
  removed = removed + redis.call('HDEL', key, 'word.' .. ARGV[i])
end
if removed > 0 then
  redis.call('HSET', key, 'wordn', math.max(n - removed, 0))
  redis.call('HINCRBY', key, 'wordver', 1)
end
return removed
