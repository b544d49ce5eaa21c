-- clock.lua: the decision's clock, for the scripts but the reserve script
-- (which reads it written out: now.lua).
--
-- Provides: clock(arg), the instant in µs: the caller's, when arg is not
-- empty, else the server's TIME.
-- Needs: nothing.

local function clock(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
