-- reserve.lua: decide whether a call may spend its units under every limit
-- it names, and record it when it may, in one atomic step: now, or as a
-- hold at the earliest instant it fits, after every hold already waiting.
--
-- Needs: now.lua (now: the clock); fast.lua (n, read, nread, names: the
-- metas and the pauses), which took the common case; log.lua; decide.lua.
--
-- KEYS: meta_1, ..., meta_n, log_1, ..., log_n (the pauses are named after
--       the metas: see fast.lua); no logs when every limit is a token
--       bucket's, which keeps none (the Limiter's withoutBucketLogs)
-- ARGV: clock    µs from the caller, or '' for the server's TIME
--       maxwait  how far in µs the admission instant may lie after now:
--                0 for an immediate decision
--       charges  '' for one charge; for several, where each charge's
--                windows start among the limits ("1,3"), so that a pause
--                found names its bucket (background.lua's waiter id has
--                this place)
--       then decide.lua's, per limit
--
-- Reply: {admitted (1 or 0), now, at, remaining, by, room_1, ..., room_n},
--   or fast.lua's string
--   at: the admission instant when admitted; when refused, the earliest
--   instant the units would fit given what is recorded.
--   remaining: the least room left among the limits at now (a lower bound
--   while expired entries linger in a sum).
--   by: what set at, when later than now: i > 0 the i-th limit, -i the
--   i-th pause key; 0 for nothing (now) or the queue of holds.
--   room_i: the room the i-th limit has left, after this call when admitted.
--
-- Entries that have left the window are dropped only when the room they
-- take is needed, or in batches once the oldest is a window past leaving;
-- TTLs are pushed back only when they would fall short, with a window's
-- margin. So the common case, which fast.lua takes, costs the clock, one
-- read (every meta) and one SET per limit, as a GCRA
-- decision does, and an RPUSH when the call opens a new slice.

local maxwait = ARGV[2] + 0
local limits = windows(n, n)
local t0, by = prepare(limits, read, nread, now, names)
if not t0 then return by end
local at, beyond, remaining
at, beyond, by, remaining = place(limits, t0, by)
if beyond or at - now > maxwait then
  keep(limits, now)
  return {0, now, at, remaining, by, unpack(rooms(limits))}
end
remaining = admit(limits, at, now)
return {1, now, at, remaining, by, unpack(rooms(limits))}
