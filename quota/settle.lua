-- settle.lua: replace an admitted reservation's units in one bucket with
-- what the call truly cost, in the entry that counts them (find() in
-- log.lua), at its own instant: the call then counts its true cost in
-- each window for a window from when it was admitted (at most a slice
-- longer), never less. A refund frees its room at once; an extra charge
-- counts even when it takes the window over its limit (the upstream spent
-- it): later callers wait it out. An entry that has left its log (trimmed,
-- or its window gone) has nothing left to settle.
--
-- Needs: clock.lua, log.lua.
--
-- KEYS: meta_1, ..., meta_n, then log_1, ..., log_n (the settled
--       buckets' windows: one round trip settles every bucket of a call);
--       no logs when every window is a token bucket's, which keeps none
-- ARGV: clock, the call's instant (µs), then per window: the difference
--       (true units less those counted in its bucket) and span (see
--       limit() in log.lua)
-- Reply: the number of windows settled.

local now = clock(ARGV[1])
local at = tonumber(ARGV[2])
local settled = 0
local n = (#ARGV - 2) / 2
for i = 1, n do
  local L = limit(KEYS[n + i], KEYS[i], ARGV[2 + 2 * i])
  load(L, redis.call('GET', L.meta))
  local where = find(L, at)
  if where then
    change(L, where, tonumber(ARGV[1 + 2 * i]))
    settled = settled + 1
  end
  if where or L.dirty then save(L, now) end -- find() may have pushed closed slices
end
return settled
