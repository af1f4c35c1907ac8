-- The send checks of a batch of requests, in their order, on one server
-- (every key of the batch in one script; not for a cluster).
-- KEYS: the batch's distinct keys, its token buckets first
--   (ratelimit:user:{user}, ratelimit:ip:{addr}), then its flags
--   (mute:user:{user}, mute:user:{user}:room:<room>, room:ban:{room}:<user>).
-- ARGV[1] the number of buckets B; ARGV[2i], ARGV[2i+1] rate (tokens per
--   second) and burst of bucket i; then six values per request: n, its user
--   bucket, its address bucket, its mute flags (everywhere, in the room) and
--   its ban, each an index into KEYS (0: none).
-- A bucket is the string "tokens:ms", refilled on the server clock; a flag
--   holds the server time (Unix ms) it ends at and has that TTL (a flag with
--   another value is read with PTTL).
-- A request is checked against everything before it takes anything: ban,
-- mutes, the user's bucket, the address's bucket; an admitted request takes
-- n tokens from both. Each changed bucket is written once, at the end.
-- Returns two integers per request: 1 admitted, -2 banned, -3 muted
-- everywhere, -1 muted in the room, 0 the user's bucket refused, 2 the
-- address's; then the ms the ban or mute still
-- lasts or until the bucket holds n tokens.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local vals = redis.call('MGET', unpack(KEYS))
local nb = tonumber(ARGV[1])
local tokens, rate, burst, dirty = {}, {}, {}, {}
for i = 1, nb do
  rate[i] = tonumber(ARGV[2 * i])
  burst[i] = tonumber(ARGV[2 * i + 1])
  local tok, ts
  local v = vals[i]
  if v then
    local c = string.find(v, ':', 1, true)
    if c then
      tok = tonumber(string.sub(v, 1, c - 1))
      ts = tonumber(string.sub(v, c + 1))
    end
  end
  if tok == nil or ts == nil then
    tok = burst[i]
    ts = now
  end
  if now > ts then
    tok = math.min(burst[i], tok + (now - ts) * rate[i] / 1000)
  end
  tokens[i] = tok
end
-- left returns what flag k still lasts in ms, or nil when it is not set.
local function left(k)
  if k == 0 or not vals[k] then
    return nil
  end
  local u = tonumber(vals[k])
  if u and u > 1e12 then
    return math.max(u - now, 0)
  end
  local p = redis.call('PTTL', KEYS[k])
  if p == -2 then
    return nil
  end
  return math.max(p, 0)
end
local out = {}
local p = 2 * nb + 2
while p + 5 <= #ARGV do
  local n = tonumber(ARGV[p])
  local ub = tonumber(ARGV[p + 1])
  local ib = tonumber(ARGV[p + 2])
  local code, ms = 1, 0
  local l = left(tonumber(ARGV[p + 5]))
  if l then
    code, ms = -2, l
  else
    local la = left(tonumber(ARGV[p + 3]))
    l = la or left(tonumber(ARGV[p + 4]))
    if la then
      code, ms = -3, la
    elseif l then
      code, ms = -1, l
    elseif tokens[ub] < n then
      code, ms = 0, math.ceil((n - tokens[ub]) * 1000 / rate[ub])
    elseif ib > 0 and tokens[ib] < n then
      code, ms = 2, math.ceil((n - tokens[ib]) * 1000 / rate[ib])
    else
      tokens[ub] = tokens[ub] - n
      dirty[ub] = true
      if ib > 0 then
        tokens[ib] = tokens[ib] - n
        dirty[ib] = true
      end
    end
  end
  out[#out + 1] = code
  out[#out + 1] = ms
  p = p + 6
end
for i = 1, nb do
  if dirty[i] then
    redis.call('SET', KEYS[i], tostring(tokens[i]) .. ':' .. now, 'PX', math.ceil(burst[i] * 1000 / rate[i]) + 1000)
  end
end
return out
