-- capped.lua: a decision that takes a slot of each of its caps in the
-- same atomic step (Limiter.ReserveCapped): the units and the slots
-- together, or neither. A capped request so costs one round trip for its
-- units and its slots rather than one for each.
--
-- Needs: decide(), the reserve script (its lean form where the call
-- allows), wrapped as a function.
--
-- KEYS: the reserve script's, then per cap its slots' holders and waiting
--       queue (slots.lua's KEYS[1] and KEYS[2])
-- ARGV: the reserve script's, then the slots' id, their ttl (µs), per cap
--       its number of slots, then how many caps. They are taken off ARGV
--       and KEYS before the decision runs, which so reads its own.
--
-- Reply: the reserve script's, the slots taken when it admits (a hold
--   included: the slot is held while the hold waits, as when the slot is
--   taken first); or {'cap', i, waiters}: the i-th cap had no slot for
--   the call, and nothing was written. waiters is 1 when callers wait in
--   the cap's room (or a slot may have expired): only slots.lua, which
--   hands slots in arrival order, may then decide, and the caller takes
--   the slot that way; 0 when every slot is held, a refusal.
--
-- Only the common case is taken here: a slot free and nobody waiting for
-- one, where slots.lua's take would give it at once too. Every other case
-- goes back to the caller, unwritten, for slots.lua.

local c = tonumber(table.remove(ARGV))
local caps = {}
for i = c, 1, -1 do
  caps[i] = {n = tonumber(table.remove(ARGV))}
end
local ttl = tonumber(table.remove(ARGV))
local id = table.remove(ARGV)
for i = c, 1, -1 do
  caps[i].queue = table.remove(KEYS)
  caps[i].holders = table.remove(KEYS)
end

-- One clock for the decision and the slots: the decision reads ARGV[1].
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
  ARGV[1] = string.format('%d', now)
else
  now = tonumber(ARGV[1])
end

for i, cap in ipairs(caps) do
  if redis.call('ZCARD', cap.queue) > 0 then
    return {'cap', i, 1}
  end
  if redis.call('ZCARD', cap.holders) >= cap.n then
    -- Full, unless a slot of a dead process lingers: slots.lua reaps it.
    local oldest = redis.call('ZRANGE', cap.holders, 0, 0, 'WITHSCORES')
    if tonumber(oldest[2]) <= now then return {'cap', i, 1} end
    return {'cap', i, 0}
  end
end

local reply = decide()
if type(reply) == 'string' or (type(reply) == 'table' and reply[1] == 1) then
  local until_ = string.format('%d', now + ttl)
  local ms = math.floor(ttl / 1000) + 1000
  for _, cap in ipairs(caps) do
    redis.call('ZADD', cap.holders, until_, id)
    redis.call('PEXPIRE', cap.holders, ms)
  end
end
return reply
