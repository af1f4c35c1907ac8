-- The room modes of one send (Pace): slow mode and unique chat.
-- KEYS[1] the sender's slow-mode mark, KEYS[2..] the unique-chat marks of
-- the send's contents, all under the room's hash tag.
-- ARGV[1] slow mode in ms (0: off), ARGV[2] unique chat in ms (0: off).
-- Returns {0, 0} when the send may go (the marks are set), {1, ms left}
-- when the sender's mark still holds, {2, i} when content i (from 0)
-- repeats a mark or an earlier content of the same send. A refusal sets
-- nothing.
local slow, uniq = tonumber(ARGV[1]), tonumber(ARGV[2])
if slow > 0 then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    return {1, left}
  end
end
if uniq > 0 then
  for i = 2, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      return {2, i - 2}
    end
    for j = 2, i - 1 do
      if KEYS[j] == KEYS[i] then
        return {2, i - 2}
      end
    end
  end
end
if slow > 0 then
  redis.call('SET', KEYS[1], '1', 'PX', slow)
end
if uniq > 0 then
  for i = 2, #KEYS do
    redis.call('SET', KEYS[i], '1', 'PX', uniq)
  end
end
return {0, 0}
