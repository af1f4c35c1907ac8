-- Sets a flag (a mute, a ban) for ARGV[1] ms: its value is the server time
-- (Unix ms) it ends at and its TTL the duration, so a reader learns what it
-- still lasts from its value alone (admit.lua's MGET) or from PTTL.
-- KEYS[1] the flag. Returns the end, in Unix ms.
local t = redis.call('TIME')
local d = tonumber(ARGV[1])
local untilMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + d
redis.call('SET', KEYS[1], string.format('%d', untilMs), 'PX', d)
return untilMs
