-- cancel.lua: give back the units a reservation counted, as if the call
-- had never been admitted.
--
-- Needs: clock.lua, log.lua.
--
-- The units leave the entry that counts them (find() in log.lua); the
-- entry keeps its instant, so the log stays sorted, and what else it
-- counts leaves the window when it would have. A sum that reaches zero
-- is dropped with its meta.
--
-- KEYS: meta_1, log_1, ..., meta_n, log_n (every window the reservation
--       charged)
-- ARGV: clock, the call's instant (µs), then per window: the units it
--       counts there, span (see limit() in log.lua)
-- Reply: the number of windows given back.

local now = clock(ARGV[1])
local at = tonumber(ARGV[2])
local given = 0
for i = 1, (#ARGV - 2) / 2 do
  local L = limit(KEYS[2 * i], KEYS[2 * i - 1], ARGV[2 * i + 2])
  load(L, redis.call('GET', L.meta))
  local where = find(L, at)
  if where then
    change(L, where, -tonumber(ARGV[2 * i + 1]))
    save(L, now)
    given = given + 1
  end
end
return given
