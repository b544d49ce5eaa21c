-- now.lua: the reserve script's clock, read first and written out (a
-- function, as clock.lua's, would be a closure made at every call), for
-- bucketfast.lua, fast.lua and the general decision.
--
-- Provides: now, the instant in µs: the caller's (ARGV[1]) when given,
-- else the server's TIME.
-- Needs: nothing. KEYS and ARGV are reserve.lua's.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[1] + 0
end
