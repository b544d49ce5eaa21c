-- series.lua: read, writing nothing, one window's usage at now and the
-- slices counted in it, for forecasts.
--
-- Needs: clock.lua, log.lua, and usage(): usage.lua wrapped as a
-- function (scripts.go does it), whose reply starts this one's, so that
-- both are read at the same instant.
--
-- KEYS: log, meta, the bucket's pause, the scope's pause (as usage.lua)
-- ARGV: clock, span (as usage.lua)
-- Reply: usage.lua's six numbers, then two per slice counted at now (the
--        units of entries dated after the window's cut): its instant and
--        its units. The log's entries, its closed slices and its open
--        slice come oldest first; then the leases and announced records,
--        each dated at its end, as it leaves the window.

local u = usage()
if u.err then return u end
local now = u[1]
local L = limit(KEYS[1], KEYS[2], ARGV[2])
local c = cut(L, now)
load(L, redis.call('GET', KEYS[2]))
scan(L, function(ts, units)
  if ts > c and units > 0 then
    u[#u + 1] = ts
    u[#u + 1] = units
  end
end)
for _, x in ipairs(L.leases) do
  if x.e > c and x.u > 0 then
    u[#u + 1] = x.e
    u[#u + 1] = x.u
  end
end
return u
