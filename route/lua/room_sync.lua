-- Brings one comet's members of a room in line with a list: adds the listed
-- members that are missing, removes the listed stale ones, and moves the
-- comet's count by exactly what changed, so the sum of room:comets keeps
-- equal to SCARD room:connections. A count that reaches zero loses its field.
-- KEYS[1] room:connections:{room}  KEYS[2] room:comets:{room}
-- ARGV[1] cometId  ARGV[2] n, the number of ids to add
-- ARGV[3 .. 2+n] ids to add  ARGV[3+n ..] ids to remove
-- Returns {ids that were missing and are now added, number removed}.
local n = tonumber(ARGV[2])
local added = {}
local nadded = 0
if n > 0 then
  local present = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV, 3, 2 + n))
  for i = 1, n do
    if present[i] == 0 then
      added[#added + 1] = ARGV[2 + i]
    end
  end
  if #added > 0 then
    nadded = redis.call('SADD', KEYS[1], unpack(added))
  end
end
local removed = 0
if #ARGV > 2 + n then
  removed = redis.call('SREM', KEYS[1], unpack(ARGV, 3 + n, #ARGV))
end
local delta = nadded - removed
if delta ~= 0 and redis.call('HINCRBY', KEYS[2], ARGV[1], delta) <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
end
return {added, removed}
