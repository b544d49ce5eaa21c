-- usage.lua: read, writing nothing, how much of one limit is spent at now.
--
-- Needs: clock.lua, log.lua.
--
-- KEYS: log, meta, the bucket's pause, the scope's pause
-- ARGV: clock, span (see limit())
--
-- Reply: {now, used, held, nextfree, reset, resume}
--   used:     units counted at now, holds dated after now included
--   held:     of those, units dated after now
--   nextfree: when the oldest counted units leave the window (0: none counted)
--   reset:    when every counted unit has left: the next midnight for a
--             calendar day (0: nothing counted in a sliding window)
--   resume:   when the latest pause of the bucket or scope ends (0: none)

local now = clock(ARGV[1])
local L = limit(KEYS[1], KEYS[2], ARGV[2])
local c = cut(L, now)
if not c then
  return redis.error_reply('ERR tollgate: clock outside the calendar days sent')
end
local read = redis.call('MGET', KEYS[2], KEYS[3], KEYS[4])
load(L, read[1])

-- Units counted at now: the sum less what has left, entries and leases.
local used, first, latest = 0, nil, L.tail
if L.sum > 0 then
  used = L.sum
  for _, x in ipairs(L.leases) do
    if x.e <= c then
      used = used - x.u
    else
      if not first or x.e < first then first = x.e end
      if x.e > latest then latest = x.e end
    end
  end
  if L.sum > L.leased and L.head ~= 0 then
    scan(L, function(ts, units)
      if ts > c then
        if not first or ts < first then first = ts end
        return true
      end
      used = used - units
    end)
  end
end

local held = 0
if used > 0 and L.sum > L.leased and L.tail > now then
  if L.open.u > 0 and L.open.t > now then held = L.open.u end
  for k = #L.buf, 1, -1 do
    if L.buf[k].t <= now then break end
    held = held + L.buf[k].u
  end
  local from = 1
  while true do
    local batch = redis.call('LRANGE', L.log, -(from + BATCH - 1), -from)
    local done = #batch < BATCH
    for i = #batch, 1, -1 do
      local ts, units = entry(L.log, batch[i])
      if ts <= now then
        done = true
        break
      end
      held = held + units
    end
    if done then break end
    from = from + BATCH
  end
end

local nextfree, reset = 0, 0
if L.window > 0 then
  if used > 0 and first then
    nextfree = first + L.window
    reset = latest + L.window
  end
else
  local _, finish = day(L, now)
  reset = finish
  if used > 0 then nextfree = finish end
end

local resume = 0
for i = 2, 3 do
  local u = pause_end(KEYS[i + 1], read[i])
  if u and u > resume then resume = u end
end
return {now, used, held, nextfree, reset, resume}
