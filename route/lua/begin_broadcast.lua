-- The guards of one room batch in one round trip: the lock, cooldown, dedup
-- claims, the route lookup, and the positions and history of the claimed
-- messages.
-- KEYS[1] lock:broadcast:{room}  KEYS[2] room:cooldown:{room}
-- KEYS[3] room:comets:{room}     KEYS[4] room:timeline:{room}
-- KEYS[5] room:history:{room}    KEYS[6] room:dels:{room}
-- KEYS[7] room:state:{room}      KEYS[8..] msg:processed:{room}:{msgId}
-- ARGV[1] window ms (0: no cooldown check)  ARGV[2] owner  ARGV[3] claim TTL ms
-- ARGV[4] lock token  ARGV[5] lock TTL ms
-- ARGV[6] history size  ARGV[7] history TTL ms  ARGV[8] epoch to start if needed
-- ARGV[9] the caller's known epoch ('' if none)  ARGV[10] its known last position
-- ARGV[11..] message JSON, one per KEYS[8..], in batch order
-- Returns {status, ms, states, comets, epoch, pos, dels, last, sv}:
--   status 0: locked by the caller; states and pos per id (state 0: claimed
--             now at pos; 3: claimed before in this epoch at pos); comets =
--             HGETALL room:comets; last = the timeline's seq after the call;
--             dels = message ids deleted in the epoch so far; sv = the
--             room's settings version (its state hash's ver, 0 for none)
--   status 1: window still running for ms (nothing claimed, no lock)
--   status 2: lock held by another owner (nothing claimed, window untouched)
--   status 3: no id claimable; states per id (no lock taken)
--
-- A claim is final: msg:processed:{room}:{id} = 'pos:<epoch>:<pos>' for the
-- claim TTL, written together with the message's place in the history, so
-- the key says where the message is. An id found with a position of the
-- current epoch keeps it (state 3); one with a position of an ended epoch,
-- or beyond the stored seq, is claimed again. 'done' (1) and 'claim:<owner>' (2) are the values of
-- events and of earlier versions.
if not redis.call('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5]) then
  return {2, 0, {}, {}, '', {}, 0, 0, 0}
end
local window = tonumber(ARGV[1])
if window > 0 and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', window) then
  redis.call('DEL', KEYS[1])
  local t = redis.call('PTTL', KEYS[2])
  if t < 0 then
    redis.call('PEXPIRE', KEYS[2], window)
    t = window
  end
  return {1, math.max(t, 1), {}, {}, '', {}, 0, 0, 0}
end

-- Timeline: the history list holds the last LLEN positions, ending at seq.
-- A missing hash (expired, emptied) or a seq below what the caller already
-- assigned in the same epoch (a failover lost writes) starts a new epoch:
-- positions the history cannot serve must never be reused in one epoch.
local tl = redis.call('HMGET', KEYS[4], 'epoch', 'seq', 'dels')
local epoch, seq, dels = tl[1], tonumber(tl[2]), tonumber(tl[3]) or 0
local fresh = false
if not epoch or not seq or (epoch == ARGV[9] and seq < tonumber(ARGV[10])) then
  epoch, seq, dels, fresh = ARGV[8], 0, 0, true
end

local prefix = 'pos:' .. epoch .. ':'
local states, pos, claimed = {}, {}, {}
local known = 0
for i = 8, #KEYS do
  local k = KEYS[i]
  local p = seq + #claimed + 1
  local s = 0
  if not redis.call('SET', k, prefix .. p, 'NX', 'PX', ARGV[3]) then
    local v = redis.call('GET', k)
    local e, old = string.match(v, '^pos:([^:]*):(%d+)$')
    old = tonumber(old)
    if e == epoch and old <= seq then
      s, p = 3, old
      known = known + 1
    elseif e then
      -- A position of an ended epoch, or one the timeline no longer
      -- reaches (writes lost): the message is new to this timeline.
      redis.call('SET', k, prefix .. p, 'PX', ARGV[3])
    elseif v == 'done' then
      s, p = 1, 0
    else
      s, p = 2, 0
    end
  end
  if s == 0 then claimed[#claimed + 1] = ARGV[i + 3] end
  states[#states + 1] = s
  pos[#pos + 1] = p
end
if #claimed == 0 and known == 0 then
  redis.call('DEL', KEYS[1])
  return {3, 0, states, {}, '', {}, 0, 0, 0}
end

if #claimed > 0 then
  if fresh then
    redis.call('DEL', KEYS[5], KEYS[6])
    if tl[1] then
      redis.call('HDEL', KEYS[4], 'dels')
    end
  end
  local len = 0
  for i = 1, #claimed, 1000 do
    len = redis.call('RPUSH', KEYS[5], unpack(claimed, i, math.min(i + 999, #claimed)))
  end
  local size = tonumber(ARGV[6])
  if len > size then
    redis.call('LTRIM', KEYS[5], -size, -1)
  end
  seq = seq + #claimed
  redis.call('HSET', KEYS[4], 'epoch', epoch, 'seq', seq)
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
  redis.call('PEXPIRE', KEYS[5], ARGV[7])
  if dels > 0 then
    -- The deletion log exists only once a message of the epoch was deleted.
    redis.call('PEXPIRE', KEYS[6], ARGV[7])
  end
end
return {0, 0, states, redis.call('HGETALL', KEYS[3]), epoch, pos, dels, seq,
  tonumber(redis.call('HGET', KEYS[7], 'ver') or '0')}
