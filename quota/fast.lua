-- fast.lua: the reserve script's reads, and its common decision on
-- windows, taken before the general code (log.lua, reserve.lua) is even
-- defined.
--
-- Provides: n (the windows) and read (their metas, a table), for
-- readpauses.lua and reserve.lua when the common case does not hold.
-- Needs: binary.lua, now.lua. KEYS and ARGV are reserve.lua's; its reply
-- is the other form.
--
-- It reads every window's meta (one GET, or one MGET for
-- several windows). A meta holds an instant until which its window needs
-- no care: no hold waits, no entry is old enough to trim, no day has
-- ended, the TTL reaches past a new entry's window (log.lua's save() sets
-- it, to 0 while holds wait); and the instant until which a pause of its
-- bucket or scope may hold (written there by the pause, log.lua's
-- reach()). When the clock lies between the two for every window, and
-- every limit has room now (counting entries that may have left the
-- window, so the sum is if anything too high), the call is counted in the
-- window's open slice with one SET of its meta per window. A call that
-- starts a new slice closes the open one into the meta's closed slices,
-- and when BUFFER of them are there, one RPUSH takes them all to the log.
-- Otherwise it falls through to reserve.lua, which decides the same way
-- in every case.
--
-- This path is what most decisions cost Redis, so it runs as few commands
-- as a decision can (the clock, one read, one write per window) and
-- spares Lua its slow parts: the meta's fields are read by one
-- struct.unpack and the changed ones written by one struct.pack (C calls),
-- the rest copied as bytes; a closed slice is bytes of the meta, the
-- caller's units and room are the only strings made numbers (string.format
-- and tostring cost a C sprintf each), and no table or function is made
-- for one window (each is an allocation for Lua's collector to sweep). A
-- meta of another Redis format does not begin with "#3:" (keys.go), and
-- takes the general path, which reads it exactly or refuses it; so does a
-- clock before 2001 (15-digit instants), which the tests use to run the
-- general path alone.
-- The reply is one string of 8-byte big-endian integers, the instant and
-- each window's sum before this call (as its meta holds it), from which
-- the caller works out what remains.

local n = (#ARGV - 3) / 3 -- KEYS: the metas, then the logs
-- The metas: one window's (the commonest) as a string, several as a
-- table; the general decision gets a table either way (below).
local read
if n == 1 then
  read = redis.call('GET', KEYS[1])
else
  read = redis.call('MGET', unpack(KEYS, 1, n))
end

local sub = string.sub

-- The common case holds for every window: its meta is of this format,
-- the window needs no care now, no pause reaches it, and its limit has
-- room. Written out rather than a function: a function defined is a
-- closure and its upvalues made at every call, what Lua's collector then
-- has to sweep, on the path most decisions take. The locals hold the
-- fields of the meta checked last (log.lua names them): one window's are
-- unpacked once, here, for the write below.
local fast = now >= 1e15
local at, units, sum, en, nb, til, pz, _, exp, origin, slice
for i = 1, n do
  local m = read
  if n > 1 then m = read[i] end
  if not fast or not m or #m < HEAD or sub(m, 1, 3) ~= '#3:' then
    fast = false
    break
  end
  at, units, sum, en, nb, til, pz, _, exp, origin, slice = sunpack(META, m, 4)
  if not (now < til and now >= pz and nb < BUFFER and #m >= HEAD + 16 * nb and
      sum <= ARGV[3 * i + 2] + 0) then
    fast = false
    break
  end
end
if fast then
  -- The reply: one string made for one window, and for several, the
  -- clock's bytes, then each window's sum.
  local reply = n > 1 and spack('>i8', now)
  for i = 1, n do
    local m = read
    if n > 1 then
      m = read[i]
      at, units, sum, en, nb, _, _, _, exp, origin, slice = sunpack(META, m, 4)
    end
    local add = ARGV[3 * i + 1] + 0
    local meta
    if now < en then
      -- The call falls in the open slice, which ends after it.
      if now > at then at = now end
      meta = '#3:' .. spack('>i8i8i8', at, units + add, sum + add) .. sub(m, 28)
    else
      -- The call starts a new slice.
      en = origin + (math.floor((now - origin) / slice) + 1) * slice
      local closed = HEAD + 16 * nb -- where the closed slices end
      if units == 0 then
        meta = '#3:' .. spack('>i8i8i8i8B', now, add, sum + add, en, nb) .. sub(m, 37)
      elseif nb + 1 < BUFFER then
        -- The open slice is closed into the meta.
        meta = '#3:' .. spack('>i8i8i8i8B', now, add, sum + add, en, nb + 1) .. sub(m, 37, closed) ..
          sub(m, 4, 19) .. sub(m, closed + 1)
      else
        -- It and the closed slices join the log, in one push.
        local entries = {}
        for k = 1, nb do entries[k] = sub(m, HEAD + 16 * k - 15, HEAD + 16 * k) end
        entries[BUFFER] = sub(m, 4, 19)
        local log = KEYS[n + i]
        if redis.call('RPUSH', log, unpack(entries)) == BUFFER then
          -- The log had gone (evicted, or trimmed whole) while the meta
          -- stayed: a new list has no TTL, so give it the meta's.
          redis.call('PEXPIRE', log, string.format('%d', math.floor((exp - now) / 1000)))
        end
        meta = '#3:' .. spack('>i8i8i8i8B', now, add, sum + add, en, 0) .. sub(m, 37, HEAD) .. sub(m, closed + 1)
      end
    end
    redis.call('SET', KEYS[i], meta, 'KEEPTTL')
    if reply then
      reply = reply .. spack('>i8', sum)
    else
      reply = spack('>i8i8', now, sum)
    end
  end
  return reply
end
if n == 1 then read = {read} end
