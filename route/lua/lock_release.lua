-- Compare-and-delete: releases the lock only if the caller holds it.
-- KEYS[1] lock:broadcast:{room}  ARGV[1] token
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
