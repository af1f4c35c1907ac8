-- The last step of removing a dead comet: its connection index goes, unless
-- the comet renewed its lease meanwhile (it then keeps what it registered).
-- Both keys carry the comet id as hash tag.
-- KEYS[1] comet:{id}  KEYS[2] comet:connections:{id}
-- Returns 1 when the index was deleted, 0 when the lease is back.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[2])
return 1
