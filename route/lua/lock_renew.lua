-- Extends the lock only if the caller still holds it.
-- KEYS[1] lock:broadcast:{room}  ARGV[1] token  ARGV[2] TTL ms
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
