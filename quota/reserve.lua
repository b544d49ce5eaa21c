-- reserve.lua (after log.lua): decide whether a call may spend its cost
-- under every limit it names, and record it when it may, in one atomic step.
--
-- KEYS: log_1, meta_1, ..., log_n, meta_n, pause
-- ARGV: clock    µs from the caller, or '' for the server's TIME
--       maxwait  how far in µs the admission instant may lie after now;
--                -1 for no bound, 0 for an immediate decision, -2 to
--                record without checking the limits (units already spent)
--       id       unique suffix for the entries written
--       n        number of limits
--       np       number of pause fields, then the fields ('*' and buckets)
--       then per limit: cost, units, window, nb, nb midnights (see limit())
--
-- Reply: {admitted (1 or 0), now, at, remaining, by}
--   at: the admission instant when admitted; when refused, the earliest
--   instant the cost would fit given what is recorded.
--   remaining: the least room left among the limits at now.
--   by: what set at, when later than now: i > 0 the i-th limit, -i the
--   i-th pause field; 0 for nothing (now) or the queue of holds.

local now = clock(ARGV[1])
local maxwait = tonumber(ARGV[2])
local id = ARGV[3]
local n = tonumber(ARGV[4])
local np = tonumber(ARGV[5])
local pausefields = {}
for i = 1, np do pausefields[i] = ARGV[5 + i] end

local limits = {}
local a = 6 + np
for i = 1, n do
  local cost, units = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local L
  L, a = limit(KEYS[2 * i - 1], KEYS[2 * i], a + 2)
  L.cost, L.units = cost, units
  limits[i] = L
end

-- Drop the entries that no longer count: those dated at or before c.
local function expire(L, c)
  while L.sum > 0 and L.head <= c do
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
  end
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

-- How long, in ms, the keys must live: until every entry has left its window.
local function ttl(L)
  local last
  if L.window > 0 then
    last = L.tail + L.window
  else
    local _, finish = day(L, L.tail)
    last = finish or (L.tail + 86400000000)
  end
  return math.floor((last - now) / 1000) + 1000
end

local function save(L)
  if L.sum == 0 then
    redis.call('DEL', L.meta)
    return
  end
  local ms = ttl(L)
  redis.call('SET', L.meta, string.format('%d:%d:%d', L.sum, L.tail, L.head), 'PX', ms)
  redis.call('PEXPIRE', L.log, ms)
end

-- Bring every log to now and find where the new entry may go: after the
-- newest entry of each log it joins (first come, first served), and after
-- any pause of its buckets or scope.
local t0 = now
for _, L in ipairs(limits) do
  load(L)
  local c = cut(L, now)
  if not c then
    return redis.error_reply('ERR tollgate: clock outside the calendar days sent')
  end
  expire(L, c)
  if L.sum > 0 and L.tail > t0 then t0 = L.tail end
end
local by = 0
local resume = redis.call('HMGET', KEYS[2 * n + 1], unpack(pausefields))
for i = 1, np do
  local u = tonumber(resume[i])
  if u and u > t0 then t0, by = u, -i end
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

local stamp = string.format('%d:', at)
for _, L in ipairs(limits) do
  redis.call('RPUSH', L.log, stamp .. string.format('%d:', L.cost) .. id)
  if L.sum == 0 then L.head = at end
  L.sum = L.sum + L.cost
  L.tail = at
  save(L)
  remaining = math.min(remaining, L.units - L.sum)
end
return {1, now, at, math.max(remaining, 0), by}
