-- lease.lua: take a lease of units a process spends on its own, or end
-- one, giving back what it did not spend.
--
-- Needs: clock.lua, log.lua.
--
-- A lease is taken only when it fits now and no hold waits (it does not
-- jump the queue), up to the units asked; it counts in the sum from now and
-- leaves the window as an entry dated at its end would. It never crosses a
-- calendar day's end. Ending it early dates what was spent at the end,
-- after every spend, and gives the rest back.
--
-- KEYS: the meta per window, the bucket's pause, the scope's pause, then
--       the logs (reserve.lua's order)
-- ARGV: clock, op ('take' or 'end'), id, units (asked, or spent for
--       'end'), duration µs, then per window: limit units, span (see
--       limit())
-- Reply: take: {granted (0: refused), now, end, or when refused the
--        instant it might fit}; end: {1}

local now = clock(ARGV[1])
local op, id, units, duration = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local n = (#ARGV - 5) / 2
local nread = #KEYS - n
local limits = {}
for i = 1, n do
  local L = limit(KEYS[nread + i], KEYS[i], ARGV[2 * i + 5])
  L.units = tonumber(ARGV[2 * i + 4])
  limits[i] = L
end
local read = redis.call('MGET', unpack(KEYS, 1, nread))
for i, L in ipairs(limits) do load(L, read[i]) end

if op == 'end' then
  for _, L in ipairs(limits) do
    for j, x in ipairs(L.leases) do
      if x.id == id then
        local spent = math.min(units, x.u)
        local e = math.min(x.e, now)
        L.sum, L.leased = L.sum - x.u, L.leased - x.u
        table.remove(L.leases, j)
        if spent > 0 and L.tail <= e then
          -- What was spent becomes an ordinary entry dated at the end:
          -- the log stays sorted, and the meta keeps only live leases.
          append(L, e, spent, now)
        else
          if spent > 0 then
            -- A hold is dated later: keep it a lease record, out of the log.
            L.leases[#L.leases + 1] = {id = id, e = e, u = spent}
            L.leased, L.sum = L.leased + spent, L.sum + spent
          end
          save(L, now)
        end
        break
      end
    end
  end
  return {1}
end

local t0 = now
for _, L in ipairs(limits) do
  local c = cut(L, now)
  if not c then
    return redis.error_reply('ERR tollgate: clock outside the calendar days sent')
  end
  if L.sum > 0 then expire(L, c, true) end
  if L.sum > L.leased and L.tail > t0 then t0 = L.tail end
end
for i = n + 1, nread do
  local u = pause_end(KEYS[i], read[i])
  if u and u > t0 then t0 = u end
end
local granted = units
for _, L in ipairs(limits) do
  granted = math.min(granted, L.units - L.sum)
end
if t0 > now or granted < 1 then
  local at = t0
  for _, L in ipairs(limits) do
    local f = fit(L, t0, 1)
    if f and f > at then at = f end
    if L.dirty then save(L, now) end
  end
  return {0, now, at}
end
local e = now + duration
for _, L in ipairs(limits) do
  if L.window == 0 then
    local _, finish = day(L, now)
    if finish and e >= finish then e = finish - 1 end
  end
end
for _, L in ipairs(limits) do
  L.leases[#L.leases + 1] = {id = id, e = e, u = granted}
  L.leased, L.sum = L.leased + granted, L.sum + granted
  save(L, now)
end
return {granted, now, e}
