-- Token bucket, optionally behind mute flags. Takes ARGV[3] tokens if
-- available; refills ARGV[1] tokens per second up to ARGV[2]. Uses the server
-- clock so every caller agrees. A negative ARGV[3] gives tokens back (a
-- request refused by another check of the same round trip), up to the burst.
-- KEYS[1]   the bucket: ratelimit:user:{user}, ratelimit:ip:{addr} or
--           ratelimit:high:{room}, the
--           string "tokens:ms" (the format of admit.lua)
-- KEYS[2..] mute flags of the same user (same hash tag): the mute everywhere,
--           then the mute in the room; when one exists the bucket is not
--           touched.
-- Returns {1, 0} when allowed, {0, ms until enough tokens} when limited,
-- {-3, ms the mute still lasts} when muted everywhere (KEYS[2]), {-1, ms}
-- when muted by a later flag.
for i = 2, #KEYS do
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl ~= -2 then
    if i == 2 then
      return {-3, ttl}
    end
    return {-1, ttl}
  end
end
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens, ts
local v = redis.call('GET', KEYS[1])
if v then
  local c = string.find(v, ':', 1, true)
  if c then
    tokens = tonumber(string.sub(v, 1, c - 1))
    ts = tonumber(string.sub(v, c + 1))
  end
end
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
end
local allowed = 0
local wait = 0
if n < 0 then
  tokens = math.min(burst, tokens - n)
  allowed = 1
elseif tokens >= n then
  tokens = tokens - n
  allowed = 1
else
  wait = math.ceil((n - tokens) * 1000 / rate)
end
redis.call('SET', KEYS[1], tostring(tokens) .. ':' .. now, 'PX', math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
