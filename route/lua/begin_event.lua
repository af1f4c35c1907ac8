-- The guards of one room event (a deletion or a ban) in one round trip:
-- lock check, dedup claim, lock acquisition, the route lookup, and for a
-- deletion the history rewrite.
-- KEYS[1] lock:broadcast:{room}  KEYS[2] room:comets:{room}
-- KEYS[3] room:history:{room}    KEYS[4] msg:processed:{room}:{eventId}
-- KEYS[5] room:timeline:{room}   KEYS[6] room:dels:{room}
-- KEYS[7] room:state:{room}
-- ARGV[1] owner  ARGV[2] claim TTL ms  ARGV[3] lock token  ARGV[4] lock TTL ms
-- ARGV[5] deletion log size
-- ARGV[6..] ids of the messages to delete (none for a ban)
-- Returns {status, state, comets, tombstoned, epoch, dels, sv}:
--   status 0: locked by the caller, the event claimed; comets = HGETALL
--             room:comets; tombstoned = history elements replaced; epoch and
--             dels: the room's epoch ('' without a timeline) and the ids
--             deleted in it so far, this event's included; sv the
--             room's settings version (its state hash's ver, 0 for none)
--   status 2: lock held by another owner (nothing claimed)
--   status 3: not claimable: state 1 processed before, 2 claimed by another
--
-- A deleted message keeps its place in room:history (positions follow
-- from the places): its element becomes {"id":"<id>","deleted":true}.
-- Elements are the JSON of a message, whose first field is its id; every
-- element of a deleted id is replaced, since a redelivered message may
-- hold more than one position. The list is read in slices of 500.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {2, 0, {}, 0, '', 0, 0}
end
local mine = 'claim:' .. ARGV[1]
if not redis.call('SET', KEYS[4], mine, 'NX', 'PX', ARGV[2]) then
  local v = redis.call('GET', KEYS[4])
  if v == 'done' then
    return {3, 1, {}, 0, '', 0, 0}
  elseif v ~= mine then
    return {3, 2, {}, 0, '', 0, 0}
  end
  redis.call('PEXPIRE', KEYS[4], ARGV[2])
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])

local want = {}
for i = 6, #ARGV do
  want[ARGV[i]] = '{"id":"' .. ARGV[i] .. '","deleted":true}'
end
local tombstoned = 0
if #ARGV >= 6 then
  local len = redis.call('LLEN', KEYS[3])
  for from = 0, len - 1, 500 do
    local slice = redis.call('LRANGE', KEYS[3], from, from + 499)
    for j = 1, #slice do
      local id = string.match(slice[j], '^{"id":"([^"]*)"')
      local tomb = id and want[id]
      if tomb and slice[j] ~= tomb then
        redis.call('LSET', KEYS[3], from + j - 1, tomb)
        tombstoned = tombstoned + 1
      end
    end
  end
end

-- The deletion log: every deleted id of the epoch, in order, the newest
-- ARGV[5] kept, counted in the timeline's dels field; it lives as long as
-- the timeline. A comet that missed a del event reads what it lacks.
local sv = tonumber(redis.call('HGET', KEYS[7], 'ver') or '0')
local tl = redis.call('HMGET', KEYS[5], 'epoch', 'dels')
local epoch, dels = tl[1], tonumber(tl[2]) or 0
if not epoch then
  return {0, 0, redis.call('HGETALL', KEYS[2]), tombstoned, '', 0, sv}
end
if #ARGV >= 6 then
  redis.call('RPUSH', KEYS[6], unpack(ARGV, 6))
  redis.call('LTRIM', KEYS[6], -tonumber(ARGV[5]), -1)
  dels = redis.call('HINCRBY', KEYS[5], 'dels', #ARGV - 5)
  local ttl = redis.call('PTTL', KEYS[5])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[6], ttl)
  end
end
return {0, 0, redis.call('HGETALL', KEYS[2]), tombstoned, epoch, dels, sv}
