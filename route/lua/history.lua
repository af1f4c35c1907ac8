-- A range of one room's history, read atomically with the timeline head.
-- KEYS[1] room:timeline:{room}  KEYS[2] room:history:{room}
-- ARGV[1] since: the messages after this position; negative: the newest
-- ARGV[2] limit: at most this many messages
-- Returns {epoch, last, first, from, msgs, dels}: last is the last position
-- assigned, first the oldest kept (last + 1 when none is kept), msgs the
-- stored JSON of positions from, from+1, ..., dels the message ids deleted
-- in the epoch ('' and zeros for a room without a timeline).
local tl = redis.call('HMGET', KEYS[1], 'epoch', 'seq', 'dels')
local last = tonumber(tl[2])
local dels = tonumber(tl[3]) or 0
if not tl[1] or not last then
  return {'', 0, 1, 1, {}, 0}
end
local first = last - redis.call('LLEN', KEYS[2]) + 1
local since, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local from
if since < 0 then
  from = math.max(first, last - limit + 1)
else
  from = math.max(first, since + 1)
end
local to = math.min(last, from + limit - 1)
if to < from then
  return {tl[1], last, first, from, {}, dels}
end
return {tl[1], last, first, from, redis.call('LRANGE', KEYS[2], from - first, to - first), dels}
