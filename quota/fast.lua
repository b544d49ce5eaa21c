-- fast.lua: the start of the reserve script, and its common decision,
-- taken before the general code (log.lua, reserve.lua) is even defined.
--
-- Provides: now (the clock), n (the windows), nread (the keys the general
-- decision reads), read (the metas; reserve.lua reads the pauses into it),
-- for reserve.lua when the common case does not hold.
-- Needs: binary.lua. KEYS and ARGV are reserve.lua's; its reply is the
-- other form.
--
-- It reads the clock and every window's meta (one GET, or one MGET for
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
-- spares Lua its slow parts: the meta's fields are read and written by
-- struct.unpack and struct.pack, one C call each, and the caller's units
-- and room are the only strings made numbers. A meta of another Redis
-- format does not begin with "#3:" (keys.go), and takes the general path,
-- which reads it exactly or refuses it; so does a clock before 2001
-- (15-digit instants), which the tests use to run the general path alone.
-- The reply is one string, "<now>:<sum_1>:...:<sum_n>" with the sums
-- before this call, from which the caller works out what remains.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local n = (#ARGV - 3) / 3
local nread = #KEYS - n -- the metas, then the pauses; the logs follow
local read
if n == 1 then
  read = {redis.call('GET', KEYS[1])}
else
  read = redis.call('MGET', unpack(KEYS, 1, n))
end

local sub = string.sub

-- The common case holds for window i, whose meta m unpacked is til ...
-- pos: the meta is of this format, its window needs no care now, no pause
-- reaches it, and its limit has room.
local function holds(i, m, til, sum, pz, nb, pos)
  return now < til and now >= pz and nb < BUFFER and #m >= pos + 16 * nb - 1 and
    sum <= tonumber(ARGV[3 * i + 2])
end

local fast = now >= 1e15
for i = 1, n do
  local m = read[i]
  if not m or #m < HEAD or sub(m, 1, 3) ~= '#3:' then
    fast = false
    break
  end
  if n > 1 then -- one window is checked as it is written, below
    local til, _, sum, _, _, _, _, _, _, pz, nb, pos = sunpack(META, m, 4)
    if not holds(i, m, til, sum, pz, nb, pos) then
      fast = false
      break
    end
  end
end
if fast then
  local reply = string.format('%d', now)
  for i = 1, n do
    local m = read[i]
    local til, en, sum, ou, ot, hd, ex, og, sl, pz, nb, pos = sunpack(META, m, 4)
    if n == 1 and not holds(i, m, til, sum, pz, nb, pos) then
      fast = false
      break
    end
    local add = tonumber(ARGV[3 * i + 1])
    local rest = pos + 16 * nb -- the leases and records
    local closed = sub(m, pos, rest - 1)
    if now < en then
      -- The call falls in the open slice, which ends after it.
      ou = ou + add
      if now > ot then ot = now end
    else
      -- The call starts a new slice: the open one is closed.
      if ou > 0 then
        closed = closed .. spack(ENTRY, ot, ou)
        nb = nb + 1
        if nb == BUFFER then
          -- The closed slices join the log, in one push.
          local e = {sunpack('>' .. string.rep('i8', 2 * nb), closed)}
          local entries = {}
          for k = 1, nb do entries[k] = string.format('%d:%d', e[2 * k - 1], e[2 * k]) end
          local log = KEYS[nread + i]
          if redis.call('RPUSH', log, unpack(entries)) == nb then
            -- The log had gone (evicted, or trimmed whole) while the meta
            -- stayed: a new list has no TTL, so give it the meta's.
            redis.call('PEXPIRE', log, redis.call('PTTL', KEYS[i]))
          end
          closed, nb = '', 0
        end
      end
      en = og + (math.floor((now - og) / sl) + 1) * sl
      ou, ot = add, now
    end
    redis.call('SET', KEYS[i], '#3:' .. spack(META, til, en, sum + add, ou, ot, hd, ex, og, sl, pz, nb) ..
      closed .. sub(m, rest), 'KEEPTTL')
    reply = reply .. string.format(':%d', sum)
  end
  if fast then return reply end
end
-- The general decision reads the pauses too.
if nread > n then
  local p = redis.call('MGET', unpack(KEYS, n + 1, nread))
  for i = 1, nread - n do read[n + i] = p[i] end
end
