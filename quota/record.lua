-- record.lua: record units spent without the limiter's say (while Redis
-- could not be reached, or outside tollgate), checking no limit: they are
-- spent already. Each entry is dated now, or after the newest entry of its
-- log (a hold), so that the log stays sorted and the units count at least
-- a window from now.
--
-- Needs: clock.lua, log.lua.
--
-- KEYS: meta_1, ..., meta_n, then log_1, ..., log_n
-- ARGV: clock, then per limit: units, span (see limit() in log.lua)
-- Reply: the instant the entries are dated at.

local now = clock(ARGV[1])
local n = (#ARGV - 1) / 2
local read = redis.call('MGET', unpack(KEYS, 1, n))
local limits, at = {}, now
for i = 1, n do
  local L = limit(KEYS[n + i], KEYS[i], ARGV[2 * i + 1])
  load(L, read[i])
  local c = cut(L, now)
  if not c then
    return redis.error_reply('ERR tollgate: clock outside the calendar days sent')
  end
  if L.sum > 0 then expire(L, c, false) end
  if L.sum > L.leased and L.tail > at then at = L.tail end
  limits[i] = L
end
for i, L in ipairs(limits) do
  append(L, at, tonumber(ARGV[2 * i]), now)
end
return at
