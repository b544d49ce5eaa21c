-- reserve.lua (after fast.lua and log.lua): decide whether a call may spend
-- its cost under every limit it names, and record it when it may, in one
-- atomic step. fast.lua has read the clock (now) and every meta and the
-- pauses (read), and taken the common case.
--
-- KEYS: meta_1, sum_1, ..., meta_n, sum_n, the pause of each bucket
--       charged and the scope's, then log_1, ..., log_n: what a decision
--       reads comes first, for one MGET of a range
-- ARGV: clock    µs from the caller, or '' for the server's TIME
--       maxwait  how far in µs the admission instant may lie after now;
--                -1 for no bound, 0 for an immediate decision, -2 to
--                record without checking the limits (units already spent)
--       id       a unique suffix for the entries written
--       then per limit: cost, room (its units less cost), span (see limit())
--
-- Reply: {admitted (1 or 0), now, at, remaining, by}, or fast.lua's string
--   at: the admission instant when admitted; when refused, the earliest
--   instant the cost would fit given what is recorded.
--   remaining: the least room left among the limits at now (a lower bound
--   while expired entries linger in a sum).
--   by: what set at, when later than now: i > 0 the i-th limit, -i the
--   i-th pause key; 0 for nothing (now) or the queue of holds.
--
-- Entries that have left the window are dropped only when the room they
-- take is needed, or in batches once the oldest is a window past leaving;
-- TTLs are pushed back only when they would fall short, with a window's
-- margin. So the common case, which fast.lua takes, costs three commands:
-- MGET (every meta and sum, and the pauses), RPUSH and INCRBY per limit.

local maxwait = tonumber(ARGV[2])
local id = ARGV[3]

local limits = {}
for i = 1, n do
  local L = limit(KEYS[nread + i], KEYS[2 * i - 1], KEYS[2 * i], ARGV[3 * i + 3])
  L.cost = tonumber(ARGV[3 * i + 1])
  L.units = tonumber(ARGV[3 * i + 2]) + L.cost
  limits[i] = L
end

-- Bring every log up to date where it matters and find where the new entry
-- may go: after the newest entry of each log it joins (first come, first
-- served), and after any pause of its buckets or scope.
local t0 = now
for i, L in ipairs(limits) do
  load(L, read[2 * i - 1], read[2 * i])
  local c = cut(L, now)
  if not c then
    return redis.error_reply('ERR tollgate: clock outside the calendar days sent')
  end
  if L.sum > 0 then
    -- Trim when the room is needed, or a window after the oldest entry
    -- left (a day's entries at once); drop leases that have left.
    local needed = L.sum + L.cost > L.units
    local stale = L.head ~= 0 and L.head <= c and (L.window == 0 or L.head <= c - L.window)
    local due = false
    for _, x in ipairs(L.leases) do
      if x.e <= c then due = true end
    end
    if needed or stale or due then expire(L, c, needed) end
  end
  if L.sum > L.leased and L.tail > t0 then t0 = L.tail end
end
local by = 0
for i = 2 * n + 1, nread do
  local u = tonumber(read[i])
  if u and u > t0 then t0, by = u, -(i - 2 * n) end
end

local at, beyond = t0, false
local remaining = nil
for i, L in ipairs(limits) do
  if maxwait ~= -2 then
    local f = fit(L, t0, L.cost)
    if not f then
      beyond, by = true, i
    elseif f > at then
      at, by = f, i
    end
  end
  local room = L.units - L.sum
  if not remaining or room < remaining then remaining = room end
end

if beyond or (maxwait >= 0 and at - now > maxwait) then
  for _, L in ipairs(limits) do
    if L.dirty then save(L, now) end
  end
  return {0, now, at, math.max(remaining, 0), by}
end

local at_stamp = string.format('%d:', at)
for _, L in ipairs(limits) do
  if redis.call('RPUSH', L.log, at_stamp .. string.format('%d:', L.cost) .. id) == 1 then
    L.exp = 0 -- a new list: it has no TTL yet
  end
  if L.head == 0 then L.head = at end
  L.sum = L.sum + L.cost
  L.tail = at
  save(L, now)
  remaining = math.min(remaining, L.units - L.sum)
end
return {1, now, at, math.max(remaining, 0), by}
