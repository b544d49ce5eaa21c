-- fast.lua: the start of reserve (before log.lua and reserve.lua), and the
-- common decision, taken before the general code is even defined.
--
-- It reads the clock and, in one MGET, every window's meta and sum and the
-- scope's pauses. A meta opens with an instant until which its window needs
-- no care: no hold waits, no entry is old enough to trim, no day has ended,
-- the TTL reaches past a new entry's window (reserve.lua's save() sets it,
-- to 0 while holds wait). Before that instant, when every limit has room
-- now (counting entries that may have left the window, so the sum is if
-- anything too high) and no pause is set, the call is recorded with one
-- RPUSH and one INCRBY per window. Otherwise it falls through to
-- reserve.lua, which decides the same way in every case; `now`, `n` and
-- `read` carry over.
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
local read

if n == 1 then
  -- One limit, the commonest decision: no tables, no loops.
  read = redis.call('MGET', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
  local m, s = read[1], read[2]
  if m and s and not read[3] and not read[4] and ARGV[2] ~= '-2' then
    local sum, units = tonumber(s) + tonumber(ARGV[6]), tonumber(ARGV[7])
    if sum <= units and tonumber(string.match(m, '^%d+')) > now then
      if redis.call('RPUSH', KEYS[1], stamp .. ':' .. ARGV[6] .. ':' .. ARGV[3] .. ARGV[4]) == 1 then
        -- The log had gone (evicted) while its meta stayed: a new list
        -- has no TTL, so give it the meta's.
        redis.call('PEXPIRE', KEYS[1], redis.call('PTTL', KEYS[2]))
      end
      redis.call('INCRBY', KEYS[3], ARGV[6])
      return {1, now, now, units - sum, 0}
    end
  end
else
  local keys = {}
  for i = 1, n do
    keys[2 * i - 1], keys[2 * i] = KEYS[3 * i - 1], KEYS[3 * i]
  end
  for i = 3 * n + 1, #KEYS do keys[#keys + 1] = KEYS[i] end
  read = redis.call('MGET', unpack(keys))
  local ok = ARGV[2] ~= '-2'
  for i = 2 * n + 1, #read do
    if read[i] then ok = false end
  end
  if ok then
    local remaining, a = nil, 6
    for i = 1, n do
      local m, s = read[2 * i - 1], read[2 * i]
      if not m or not s or tonumber(string.match(m, '^%d+')) <= now then
        ok = false
        break
      end
      local left = tonumber(ARGV[a + 1]) - tonumber(s) - tonumber(ARGV[a])
      if left < 0 then
        ok = false
        break
      end
      if not remaining or left < remaining then remaining = left end
      if tonumber(ARGV[a + 2]) > 0 then a = a + 3 else a = a + 4 + tonumber(ARGV[a + 3]) end
    end
    if ok then
      local id = ARGV[3] .. ARGV[4]
      a = 6
      for i = 1, n do
        local cost = ARGV[a]
        if redis.call('RPUSH', KEYS[3 * i - 2], stamp .. ':' .. cost .. ':' .. id) == 1 then
          redis.call('PEXPIRE', KEYS[3 * i - 2], redis.call('PTTL', KEYS[3 * i - 1]))
        end
        redis.call('INCRBY', KEYS[3 * i], cost)
        if tonumber(ARGV[a + 2]) > 0 then a = a + 3 else a = a + 4 + tonumber(ARGV[a + 3]) end
      end
      return {1, now, now, remaining, 0}
    end
  end
end
