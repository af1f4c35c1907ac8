-- Pins and unpins a room's message (SetPin, Unpin). KEYS[1] the room's
-- settings hash. ARGV[1] "pin" or "unpin"; for pin ARGV[2] the pin's JSON
-- (without its version), for unpin ARGV[2] the id of the pin to take away.
-- Returns the version the change got (the settings' counter), or 0 for an
-- unpin of a pin that is not the room's.
local key = KEYS[1]
if ARGV[1] == 'unpin' then
  local cur = redis.call('HGET', key, 'pinid')
  if cur ~= ARGV[2] then
    return 0
  end
  local v = redis.call('HINCRBY', key, 'ver', 1)
  redis.call('HDEL', key, 'pin', 'pinid')
  redis.call('HSET', key, 'pinver', v)
  return v
end
local v = redis.call('HINCRBY', key, 'ver', 1)
redis.call('HSET', key, 'pin', ARGV[2], 'pinid', ARGV[3], 'pinver', v)
return v
