-- cancel.lua: give back the units a reservation counted, as if the call
-- had never been admitted.
--
-- Needs: clock.lua, log.lua.
--
-- The units leave the entry that counts them (find() in log.lua); the
-- entry keeps its instant, so the log stays sorted, and what else it
-- counts leaves the window when it would have. A sum that reaches zero
-- is dropped with its meta. In a calendar span, where an entry's instant
-- only orders the requests, the open slice dated at the hold's instant
-- is dated back to now, within the slice.
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
    given = given + 1
    if where == 0 and L.window == 0 and L.open.u > 0 and L.open.t == at and at > now then
      -- A calendar span counts its units whatever their instants in it:
      -- the open slice, whose instant was the hold's, is dated now (or
      -- at its start, if later), so that the requests decided next are
      -- not queued behind a hold given back. (A hold still waiting in the
      -- same slice may then be overtaken: the order suffers, never the
      -- count.) The log stays sorted: the slice is the newest.
      L.open.t = math.max(now, L.open.s)
      L.tail, L.dirty = L.open.t, true
    end
  end
  if where or L.dirty then save(L, now) end -- find() may have pushed closed slices
end
return given
