-- usage.lua (after log.lua): read, writing nothing, how much of one limit is
-- spent at now.
--
-- KEYS: log, meta, sum, the bucket's pause, the scope's pause
-- ARGV: clock, window (see limit())
--
-- Reply: {now, used, held, nextfree, reset, resume}
--   used:     units counted at now, holds dated after now included
--   held:     of those, units dated after now
--   nextfree: when the oldest counted units leave the window (0: none counted)
--   reset:    when every counted unit has left: the next midnight for a
--             calendar day (0: nothing counted in a sliding window)
--   resume:   when the latest pause of the bucket or scope ends (0: none)

local now = clock(ARGV[1])
local L = limit(KEYS[1], KEYS[2], KEYS[3], 2)
local c = cut(L, now)
if not c then
  return redis.error_reply('ERR tollgate: clock outside the calendar days sent')
end
local ms = redis.call('MGET', L.meta, L.sumkey)
load(L, ms[1], ms[2])

local used, nextfree = 0, 0
if L.sum > 0 then
  used = L.sum
  if L.head <= c then
    scan(L, function(ts, cost)
      if ts > c then
        nextfree = ts
        return true
      end
      used = used - cost
    end)
  else
    nextfree = L.head
  end
end

local held = 0
if used > 0 and L.tail > now then
  local from = 1
  while true do
    local batch = redis.call('LRANGE', L.log, -(from + BATCH - 1), -from)
    local done = #batch < BATCH
    for i = #batch, 1, -1 do
      local ts, cost = entry(batch[i])
      if ts <= now then
        done = true
        break
      end
      held = held + cost
    end
    if done then break end
    from = from + BATCH
  end
end

local reset = 0
if L.window > 0 then
  if used > 0 then
    nextfree = nextfree + L.window
    reset = L.tail + L.window
  else
    nextfree = 0
  end
else
  local _, finish = day(L, now)
  reset = finish
  if used > 0 then nextfree = finish else nextfree = 0 end
end

local resume = 0
for _, u in ipairs(redis.call('MGET', KEYS[4], KEYS[5])) do
  u = tonumber(u)
  if u and u > resume then resume = u end
end
return {now, used, held, nextfree, reset, resume}
