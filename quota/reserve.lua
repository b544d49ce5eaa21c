-- reserve.lua (after fast.lua and log.lua): decide whether a call may spend
-- its cost under every limit it names, and record it when it may, in one
-- atomic step. fast.lua has read the clock (now) and every meta and the
-- pauses (read), and taken the common case.
--
-- KEYS: log_1, meta_1, sum_1, ..., log_n, meta_n, sum_n, then the pause
--       keys: one per bucket charged, then the scope's
-- ARGV: clock    µs from the caller, or '' for the server's TIME
--       maxwait  how far in µs the admission instant may lie after now;
--                -1 for no bound, 0 for an immediate decision, -2 to
--                record without checking the limits (units already spent)
--       prefix, seq  together, a unique suffix for the entries written
--       n        number of limits
--       then per limit: cost, units, window (see limit())
--
-- Reply: {admitted (1 or 0), now, at, remaining, by}
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
local id = ARGV[3] .. ARGV[4]

local limits = {}
local a = 6
for i = 1, n do
  local cost, units = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local L
  L, a = limit(KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i], a + 2)
  L.cost, L.units = cost, units
  limits[i] = L
end

-- Drop the entries dated at or before c: all of them when the log's room
-- is needed, else one batch.
local function expire(L, c, all)
  if L.tail <= c then
    -- Every entry has left: drop the log at once.
    redis.call('UNLINK', L.log)
    L.sum, L.head, L.dirty = 0, 0, true
    return
  end
  repeat
    local batch = redis.call('LRANGE', L.log, 0, BATCH - 1)
    local k = 0
    for i = 1, #batch do
      local ts, cost = entry(batch[i])
      if ts > c then break end
      k = i
      L.sum = L.sum - cost
    end
    if k > 0 then redis.call('LTRIM', L.log, k, -1) end
    L.dirty = true
    if k < #batch then
      L.head = entry(batch[k + 1])
    elseif #batch < BATCH then
      L.sum = 0 -- the log is empty; this also heals a sum the log disagrees with
    else
      L.head = entry(batch[#batch])
    end
  until not all or L.sum <= 0 or L.head > c
  if L.sum <= 0 then L.sum, L.head = 0, 0 end
end

-- The earliest instant t >= t0 at which the entries still counting leave
-- room for the cost, knowing that no entry is dated after t0: from t0 on,
-- entries only leave the window, so the first instant that fits is the one
-- at which enough of the oldest have left. nil: beyond the calendar sent.
local function fit(L, t0)
  if L.window > 0 then
    local excess = L.sum + L.cost - L.units
    if excess <= 0 then return t0 end
    local gone = 0
    local t = scan(L, function(ts, cost)
      gone = gone + cost
      if gone >= excess then return ts + L.window end
    end) or (L.tail + L.window)
    if t < t0 then t = t0 end
    return t
  end
  local start, finish = day(L, t0)
  if not start then return nil end
  local counted = L.sum
  if L.head < start then
    -- t0 lies in a later day than some entries: those no longer count.
    scan(L, function(ts, cost)
      if ts >= start then return true end
      counted = counted - cost
    end)
  end
  if counted + L.cost <= L.units then return t0 end
  if not day(L, finish) then return nil end
  return finish
end

-- Write the meta and sum back, and push the keys' expiry back when it
-- would come before every entry has left its window. The meta's until tells
-- fast.lua how long it may decide on this window alone: never while a hold
-- waits (it must queue behind it), and otherwise until the oldest entry is
-- due for trimming (or its day ends), while the TTL reaches past the window
-- of an entry written now.
local function save(L)
  if L.sum == 0 then
    redis.call('DEL', L.meta, L.sumkey)
    return
  end
  local needed
  if L.window > 0 then
    needed = L.tail + L.window + 1000000
  else
    local _, finish = day(L, L.tail)
    needed = (finish or (L.tail + 86400000000)) + 1000000
  end
  local refresh = needed > L.exp
  if refresh then
    local margin = L.window
    if margin < 1000000 then margin = 1000000 end
    L.exp = needed + margin
  end
  local till = 0
  if L.tail <= now then
    if L.window > 0 then
      till = math.min(L.head + 2 * L.window, L.exp - L.window - 1000000)
    else
      local _, finish = day(L, L.head)
      till = math.min(finish or now, L.exp - 1000000)
    end
  end
  local meta, sum = string.format('%d:%d:%d', till, L.head, L.exp), string.format('%d', L.sum)
  if refresh then
    local ms = math.floor((L.exp - now) / 1000)
    redis.call('SET', L.meta, meta, 'PX', ms)
    redis.call('SET', L.sumkey, sum, 'PX', ms)
    redis.call('PEXPIRE', L.log, ms)
  else
    redis.call('SET', L.meta, meta, 'KEEPTTL')
    redis.call('SET', L.sumkey, sum, 'KEEPTTL')
  end
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
  if L.sum > 0 and L.head <= c then
    local needed = L.sum + L.cost > L.units
    local stale = L.window == 0 or L.head <= c - L.window
    if needed or stale then expire(L, c, needed) end
  end
  if L.sum > 0 and L.tail > t0 then t0 = L.tail end
end
local by = 0
for i = 2 * n + 1, #read do
  local u = tonumber(read[i])
  if u and u > t0 then t0, by = u, -(i - 2 * n) end
end

local at, beyond = t0, false
local remaining = nil
for i, L in ipairs(limits) do
  if maxwait ~= -2 then
    local f = fit(L, t0)
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
    if L.dirty then save(L) end
  end
  return {0, now, at, math.max(remaining, 0), by}
end

local at_stamp = string.format('%d:', at)
for _, L in ipairs(limits) do
  if redis.call('RPUSH', L.log, at_stamp .. string.format('%d:', L.cost) .. id) == 1 then
    L.exp = 0 -- a new list: it has no TTL yet
  end
  if L.sum == 0 then L.head = at end
  L.sum = L.sum + L.cost
  L.tail = at
  save(L)
  remaining = math.min(remaining, L.units - L.sum)
end
return {1, now, at, math.max(remaining, 0), by}
