-- fast.lua: the start of reserve (before log.lua and reserve.lua), and the
-- common decision, taken before the general code is even defined.
--
-- It reads the clock and, in one MGET, every window's meta and sum and the
-- pauses of its buckets and scope. A meta opens with an instant until which its window needs
-- no care: no hold waits, no entry is old enough to trim, no day has ended,
-- the TTL reaches past a new entry's window (reserve.lua's save() sets it,
-- to 0 while holds wait). Before that instant, when every limit has room
-- now (counting entries that may have left the window, so the sum is if
-- anything too high) and no pause is set, the call is recorded with one
-- RPUSH and one INCRBY per window. Otherwise it falls through to
-- reserve.lua, which decides the same way in every case; `now`, `n`,
-- `nread` and `read` carry over.
--
-- KEYS, ARGV and the reply are reserve.lua's.

local now, stamp
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  stamp = t[1] .. string.sub('00000' .. t[2], -6)
else
  now = tonumber(ARGV[1])
  stamp = ARGV[1]
end
local n = tonumber(ARGV[5])
local nread = #KEYS - n -- the metas and sums, then the pauses; the logs follow
local read = redis.call('MGET', unpack(KEYS, 1, nread))

local fast = ARGV[2] ~= '-2'
for i = 2 * n + 1, nread do
  if read[i] then fast = false end
end
local remaining
if fast then
  local a = 6
  for i = 1, n do
    local m, s = read[2 * i - 1], read[2 * i]
    if not m or not s or tonumber(string.match(m, '^%d+')) <= now then
      fast = false
      break
    end
    local left = tonumber(ARGV[a + 1]) - tonumber(s) - tonumber(ARGV[a])
    if left < 0 then
      fast = false
      break
    end
    if not remaining or left < remaining then remaining = left end
    if tonumber(ARGV[a + 2]) > 0 then a = a + 3 else a = a + 4 + tonumber(ARGV[a + 3]) end
  end
end
if fast then
  local id, a = ARGV[3] .. ARGV[4], 6
  for i = 1, n do
    local log = KEYS[nread + i]
    if redis.call('RPUSH', log, stamp .. ':' .. ARGV[a] .. ':' .. id) == 1 then
      -- The log had gone (evicted) while its meta stayed: a new list has
      -- no TTL, so give it the meta's.
      redis.call('PEXPIRE', log, redis.call('PTTL', KEYS[2 * i - 1]))
    end
    redis.call('INCRBY', KEYS[2 * i], ARGV[a])
    if tonumber(ARGV[a + 2]) > 0 then a = a + 3 else a = a + 4 + tonumber(ARGV[a + 3]) end
  end
  return {1, now, now, remaining, 0}
end
