-- Token bucket, optionally behind mute flags. Takes ARGV[3] tokens if
-- available; refills ARGV[1] tokens per second up to ARGV[2]. Uses the server
-- clock so every caller agrees. A negative ARGV[3] gives tokens back (a
-- request refused by another check of the same round trip), up to the burst.
-- KEYS[1]   the bucket: ratelimit:user:{user} or ratelimit:ip:{addr}
-- KEYS[2..] mute flags of the same user (same hash tag): when one exists the
--           bucket is not touched.
-- Returns {1, 0} when allowed, {0, ms until enough tokens} when limited,
-- {-1, ms the mute still lasts} when muted.
for i = 2, #KEYS do
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl ~= -2 then
    return {-1, ttl}
  end
end
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(h[1])
local ts = tonumber(h[2])
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
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
