-- clock.lua: the decision's clock, for the scripts but the reserve script
-- (which reads it written out: now.lua).
--
-- Provides: clock(arg), the instant in µs: the caller's, when arg is not
-- empty, else the server's TIME.
-- Needs: nothing.

local function clock(arg)
  if arg ~= '' then return arg + 0 end
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2]
end
