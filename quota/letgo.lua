-- letgo.lua: frees slots of concurrency caps after body() (a settlement,
-- or nothing), in the same round trip: a settled request gives back its
-- units' difference and its slots at once (Reservation.SettleAndRelease,
-- Slot.Release).
--
-- Needs: body(), the wrapped script (one that returns nothing when the
-- slots are all there is).
--
-- KEYS: the wrapped script's, then per slot its holders and waiting queue
--       (slots.lua's KEYS[1] and KEYS[2])
-- ARGV: the wrapped script's, then per slot its id, then how many slots.
--       They are taken off ARGV and KEYS before the body runs, which so
--       reads its own.
--
-- Reply: {the body's reply (0 for none), i...}: the i-th slot was not
--   freed here, for callers wait for it; slots.lua's release must hand it
--   to the first, in arrival order. An error of the body's is its reply,
--   and no slot is freed: the caller frees them as slots.lua does.

local c = tonumber(table.remove(ARGV))
local slots = {}
for i = c, 1, -1 do
  slots[i] = {id = table.remove(ARGV)}
end
for i = c, 1, -1 do
  slots[i].queue = table.remove(KEYS)
  slots[i].holders = table.remove(KEYS)
end

local result = body()
if type(result) == 'table' and result.err then return result end
local out = {result or 0}
for i, s in ipairs(slots) do
  if redis.call('ZCARD', s.queue) > 0 then
    out[#out + 1] = i
  else
    redis.call('ZREM', s.holders, s.id)
  end
end
return out
