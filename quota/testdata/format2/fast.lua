-- fast.lua: the start of the reserve script, and its common decision,
-- taken before the general code (log.lua, reserve.lua) is even defined.
--
-- Provides: stamp (the clock, a string), now (the same, a number), n (the
-- windows), nread (the keys MGET read), read (their values), for
-- reserve.lua when the common case does not hold.
-- Needs: nothing. KEYS and ARGV are reserve.lua's; its reply is the other
-- form.
--
-- It reads the clock and, in one MGET, every window's meta and the pauses
-- of its buckets and scope. A meta holds an instant until which its window
-- needs no care: no hold waits, no entry is old enough to trim, no day has
-- ended, the TTL reaches past a new entry's window (log.lua's save() sets
-- it, to 0 while holds wait). Before that instant, when every limit has
-- room now (counting entries that may have left the window, so the sum is
-- if anything too high) and no pause is set, the call is counted in the
-- window's open slice with one SET of its meta per window (and, when the
-- call starts a new slice, one RPUSH of the slice it closes). Otherwise it
-- falls through to reserve.lua, which decides the same way in every case.
--
-- This path is what most decisions cost Redis, so it avoids what Lua makes
-- slow: every redis.call, tonumber() (strtod), string.format (a C call),
-- patterns with captures (a microsecond for a meta). The instant stays the
-- string `stamp`, compared as text with the meta's until and with the end
-- of its open slice: all are 16 digits (µs from 2001 to 2286; save() pads
-- them), and digit strings of one length sort as their numbers do in every
-- collation. The fields a call changes come first, found by plain finds.
-- A meta of another Redis format does not begin with "#2:"
-- (keys.go), and takes the general path, which reads it exactly or refuses
-- it. The check against each limit reads the sum against room, units less
-- the call's, sent by the caller. The reply is one string,
-- "<now>:<sum_1>:...:<sum_n>" with the sums before this call, from which
-- the caller works out what remains.

local stamp
if ARGV[1] == '' then
  local t = redis.call('TIME')
  stamp = t[1] .. string.sub('00000' .. t[2], -6)
else
  stamp = ARGV[1]
end
local n = (#ARGV - 3) / 3
local nread = #KEYS - n -- the metas, then the pauses; the logs follow
local read = redis.call('MGET', unpack(KEYS, 1, nread))

local fast = #stamp == 16
for i = n + 1, nread do
  if read[i] then fast = false end
end
local sub, find = string.sub, string.find
local metas = {}
if fast then
  for i = 1, n do
    local m = read[i]
    if not m or sub(m, 1, 3) ~= '#2:' or sub(m, 4, 19) <= stamp or sub(m, 37, 37) ~= ':' then
      fast = false
      break
    end
    -- The colons that end the sum (a), the open slice's units (b) and the
    -- instant of its latest call (c): plain finds, which cost Lua far
    -- less than a pattern with captures.
    local a = find(m, ':', 38, true)
    local b = a and find(m, ':', a + 1, true)
    local c = b and find(m, ':', b + 1, true)
    local sum = c and tonumber(sub(m, 38, a - 1))
    if not sum or sum > tonumber(ARGV[3 * i + 2]) then
      fast = false
      break
    end
    metas[i] = {sum, a, b, c}
  end
end
if fast then
  local reply, now = stamp, nil
  for i = 1, n do
    local m, f = read[i], metas[i]
    local sum, a, b, c = f[1], f[2], f[3], f[4]
    local add = tonumber(ARGV[3 * i + 1])
    local units = sub(m, a + 1, b - 1)
    local head
    if stamp < sub(m, 21, 36) then
      -- The call falls in the open slice, which ends after it.
      head = sub(m, 1, 37) .. string.format('%d:%d:', sum + add, tonumber(units) + add)
    else
      -- The call starts a new slice: the open one joins the log.
      if units ~= '0' then
        local log = KEYS[nread + i]
        if redis.call('RPUSH', log, sub(m, b + 1, c - 1) .. ':' .. units) == 1 then
          -- The log had gone (evicted, or trimmed whole) while the meta
          -- stayed: a new list has no TTL, so give it the meta's.
          redis.call('PEXPIRE', log, redis.call('PTTL', KEYS[i]))
        end
      end
      local origin, slice = string.match(m, '^:%d+:%d+:(%d+):(%d+)', c)
      origin, slice, now = tonumber(origin), tonumber(slice), now or tonumber(stamp)
      head = sub(m, 1, 20) .. string.format('%016d:%d:%d:',
        origin + (math.floor((now - origin) / slice) + 1) * slice, sum + add, add)
    end
    redis.call('SET', KEYS[i], head .. stamp .. sub(m, c), 'KEEPTTL')
    reply = reply .. ':' .. sub(m, 38, a - 1)
  end
  return reply
end
local now = tonumber(stamp)
