-- Marks delivered notices processed: every key, one hash tag.
-- KEYS[1..] msg:processed:user:{user}:<id> (or msg:processed:all:{all}:<id>)
-- ARGV[1] processed TTL ms
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], 'done', 'PX', ARGV[1])
end
return #KEYS
