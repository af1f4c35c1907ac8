-- Takes back what BeginBroadcast calls that failed on the caller's side may
-- have taken: the lock, when it holds one of their tokens, and then the
-- owner's claims ('claim:<owner>', an event's) on the ids. Claims are left
-- alone when the lock is not theirs: another attempt of the same owner may
-- be delivering them. A message's claim holds its position in the history
-- ('pos:...') and stays: the retry pushes the message at that position.
-- KEYS[1] lock:broadcast:{room}  KEYS[2..] msg:processed:{room}:{msgId}
-- ARGV[1] owner  ARGV[2..] tokens of the failed attempts
-- Returns the number of claims released, or -1 when the lock was not one
-- of the tokens (nothing released).
local held = redis.call('GET', KEYS[1])
local ours = false
for i = 2, #ARGV do
  if held == ARGV[i] then
    ours = true
    break
  end
end
if not ours then
  return -1
end
redis.call('DEL', KEYS[1])
local mine = 'claim:' .. ARGV[1]
local n = 0
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == mine then
    redis.call('DEL', KEYS[i])
    n = n + 1
  end
end
return n
