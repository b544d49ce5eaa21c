-- lease.lua: take a lease of units a process spends on its own, or end
-- one, giving back what it did not spend.
--
-- Needs: clock.lua, log.lua (with bucket.lua and bucketlog.lua).
--
-- A lease is taken only when it fits now and no hold waits (it does not
-- jump the queue), up to the units asked; it counts in the sum from now and
-- leaves the window as an entry dated at its end would. It never crosses a
-- calendar day's end. Ending it early dates what was spent at the end,
-- after every spend, and gives the rest back.
--
-- On a token bucket (bucket.lua) a lease of N units granted at g to be
-- spent until e = g + d counts as a call of N units at g whose worth is
-- N*P + R*(e - g): it is checked as N units at g (debt(g) + N*P <= C*P),
-- and counted with the refill its term brings besides, so that its arrival
-- time is max(TAT, g) + N*P/R + (e - g), no earlier than e + N*P/R: as if
-- its units were all spent at e. Every unit it holds reaches the upstream
-- at some instant in [g, e]; the bucket's guarantee still holds. Take any
-- T0 <= T and the calls and leases with a unit in [T0, T] (a lease has
-- g <= T and e >= T0; count all its units), in the order they were
-- decided, the first f and the last m. After f the arrival time is at
-- least T0 + its units*P/R (a call: its instant >= T0; a lease: its e >=
-- T0), and every one after adds at least its units' worth. Before the
-- last's own term is added, the arrival time is max(TAT, g_m) + its
-- units*P/R, at least T0 + all their units*P/R, and its check kept that
-- at most g_m + C*P/R <= T + C*P/R (m == f: its units are at most C).
-- So the units in [T0, T] are at most C + R*(T - T0)/P. The price: while
-- a lease runs, others find R*(e - now)/P units fewer in the bucket than
-- it holds (its term shrinks as time passes). A term is at most the time
-- the bucket takes to refill its capacity (C*P/R), so that the debt stays
-- within what a bucket can hold (MaxRefillSpan).
--
-- Ending a lease at t (no later than e) having spent k of its N units
-- makes it a lease of k units over [g, t] (none at all when k is 0): its
-- worth falls by (N - k)*P + R*(e - t), given back as a refund of a call
-- at g is (bucket_giveback: less what the calls decided after it may
-- have assumed), so no past instant goes over, and the proof above holds
-- for the lease it became.
--
-- KEYS: the meta per window, the bucket's pause, the scope's pause, then
--       the logs (reserve.lua's order)
-- ARGV: clock, op ('take' or 'end'), id, units (asked, or spent for
--       'end'), duration µs, and for 'end' the lease's grant instant, its
--       end and its units granted (take's reply; 0 for 'take'), then per
--       window: limit units, span (see limit())
-- Reply: take: {granted (0: refused), now, end, or when refused the
--        instant it might fit}; end: {1}

local now = clock(ARGV[1])
local op, id, units, duration = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local at, ends, held = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local n = (#ARGV - 8) / 2
local nread = #KEYS - n
local limits = {}
for i = 1, n do
  local L = limit(KEYS[nread + i], KEYS[i], ARGV[2 * i + 8])
  L.units = tonumber(ARGV[2 * i + 7])
  limits[i] = L
end
local read = redis.call('MGET', unpack(KEYS, 1, nread))
for i, L in ipairs(limits) do load(L, read[i]) end

if op == 'end' then
  for _, L in ipairs(limits) do
    if L.bucket then
      local spent = math.max(0, math.min(units, held))
      local worth = held * L.P + L.R * (ends - at)
      if spent > 0 then
        worth = (held - spent) * L.P + L.R * (ends - math.max(at, math.min(ends, now)))
      end
      bucket_giveback(L, at, worth, held - spent)
      save(L, now)
    end
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
  if L.bucket then
    -- At most the time the bucket takes to refill its capacity.
    local most = now + math.floor(L.C * L.P / L.R)
    if e > most then e = most end
  elseif L.window == 0 then
    local _, finish = day(L, now)
    if finish and e >= finish then e = finish - 1 end
  end
end
for _, L in ipairs(limits) do
  if L.bucket then
    -- N units at now, and the refill of its term (see above).
    bucket_admit(L, now, granted)
    L.s = L.s + L.R * (e - now)
    save(L, now)
  else
    L.leases[#L.leases + 1] = {id = id, e = e, u = granted}
    L.leased, L.sum = L.leased + granted, L.sum + granted
    save(L, now)
  end
end
return {granted, now, e}
