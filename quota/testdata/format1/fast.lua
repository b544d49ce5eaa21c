-- fast.lua: the start of the reserve script, and its common decision,
-- taken before the general code (log.lua, reserve.lua) is even defined.
--
-- Provides: stamp (the clock, a string), now (the same, a number), n (the
-- windows), nread (the keys MGET read), read (their values), for
-- reserve.lua when the common case does not hold.
-- Needs: nothing. KEYS and ARGV are reserve.lua's; its reply is the other
-- form.
--
-- It reads the clock and, in one MGET, every window's meta and sum and the
-- pauses of its buckets and scope. A meta opens with an instant until which
-- its window needs no care: no hold waits, no entry is old enough to trim,
-- no day has ended, the TTL reaches past a new entry's window (log.lua's
-- save() sets it, to 0 while holds wait). Before that instant, when every
-- limit has room now (counting entries that may have left the window, so
-- the sum is if anything too high) and no pause is set, the call is
-- recorded with one RPUSH and one INCRBY per window. Otherwise it falls
-- through to reserve.lua, which decides the same way in every case.
--
-- This path is what most decisions cost Redis, so it avoids what Lua makes
-- slow: tonumber() parses with strtod, a table reply is walked field by
-- field, string.format is a C call. The instant stays the string `stamp`,
-- compared with the meta's until as text: both are 16 digits (µs from 2001
-- to 2286; save() pads until), and digit strings of one length sort as their
-- numbers do in every collation. A meta of another Redis format does not
-- begin with a digit (keys.go), so it sorts before any stamp and takes the
-- general path, which refuses it. The check against each limit reads the
-- sum against room, units less the call's, sent by the caller. The reply is
-- one string, "<now>:<sum_1>:...:<sum_n>" with the sums before this call,
-- from which the caller works out what remains.

local stamp
if ARGV[1] == '' then
  local t = redis.call('TIME')
  stamp = t[1] .. string.sub('00000' .. t[2], -6)
else
  stamp = ARGV[1]
end
local n = (#ARGV - 3) / 3
local nread = #KEYS - n -- the metas and sums, then the pauses; the logs follow
local read = redis.call('MGET', unpack(KEYS, 1, nread))

local fast = #stamp == 16
for i = 2 * n + 1, nread do
  if read[i] then fast = false end
end
if fast then
  for i = 1, n do
    local m, s = read[2 * i - 1], read[2 * i]
    local sum = s and tonumber(s)
    if not m or not sum or string.sub(m, 1, 16) <= stamp or sum > tonumber(ARGV[3 * i + 2]) then
      fast = false
      break
    end
  end
end
if fast then
  local id, reply = ARGV[3], stamp
  for i = 1, n do
    local log, units = KEYS[nread + i], ARGV[3 * i + 1]
    if redis.call('RPUSH', log, stamp .. ':' .. units .. ':' .. id) == 1 then
      -- The log had gone (evicted) while its meta stayed: a new list has
      -- no TTL, so give it the meta's.
      redis.call('PEXPIRE', log, redis.call('PTTL', KEYS[2 * i - 1]))
    end
    redis.call('INCRBY', KEYS[2 * i], units)
    reply = reply .. ':' .. read[2 * i]
  end
  return reply
end
local now = tonumber(stamp)
