-- Marks the delivered ids processed and releases the caller's lock.
-- KEYS[1] lock:broadcast:{room}  KEYS[2..] msg:processed:{room}:{msgId}
-- ARGV[1] token  ARGV[2] processed TTL ms
-- Returns 1 when the lock was the caller's and is released, 0 otherwise.
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], 'done', 'PX', ARGV[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
