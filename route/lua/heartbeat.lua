-- Renews a comet's lease and reports what Redis held before: whether the
-- lease was there with this process's start time, and how many connections
-- the comet's index lists. Both keys carry the comet id as hash tag.
-- KEYS[1] comet:{id}  KEYS[2] comet:connections:{id}
-- ARGV[1] addr  ARGV[2] started (unix ms)  ARGV[3] ttl (ms)
-- Returns {1 if the lease was kept else 0, HLEN of the index}.
local prev = redis.call('HGET', KEYS[1], 'started')
redis.call('HSET', KEYS[1], 'addr', ARGV[1], 'started', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local kept = 0
if prev == ARGV[2] then
  kept = 1
end
return {kept, redis.call('HLEN', KEYS[2])}
