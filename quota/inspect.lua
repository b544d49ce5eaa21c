-- inspect.lua: read, writing nothing, what is under way in one bucket of
-- a scope at now: the leases out on one of its windows, the slots of its
-- cap held, the callers waiting for one, and the callers waiting in the
-- scope's background room.
--
-- Needs: clock.lua, log.lua.
--
-- KEYS: log, meta (a window of the bucket), the bucket's slot
--       holders, its slot waiting room's alive set, the scope's background
--       room's alive set
-- ARGV: clock, span (see limit())
-- Reply: {now, leases out, their units, the latest lease end (0: none),
--         slots held, slot waiters, background waiters}

local now = clock(ARGV[1])
local L = limit(KEYS[1], KEYS[2], ARGV[2])
load(L, redis.call('GET', KEYS[2]))

-- A lease is out until its end; after it, what it spent counts as an
-- entry would. Records whose id starts with '~' are not leases but units
-- an upstream announced as spent (announce.lua).
local n, units, last = 0, 0, 0
for _, x in ipairs(L.leases) do
  if string.sub(x.id, 1, 1) ~= '~' and x.e > now then
    n, units = n + 1, units + x.u
    if x.e > last then last = x.e end
  end
end

-- Holders and waiters count until the instant they expire. (Counted from
-- ZRANGEBYSCORE, which the other scripts run, so that the README's ACL
-- line grants what this one needs; a cap's holders are few.)
local after = '(' .. string.format('%d', now)
local function live(key) return #redis.call('ZRANGEBYSCORE', key, after, '+inf') end
return {now, n, units, last, live(KEYS[3]), live(KEYS[4]), live(KEYS[5])}
