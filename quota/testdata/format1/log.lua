-- log.lua: the weighted sliding log, shared by the scripts that decide,
-- record, read usage and lease.
--
-- Provides: FORMAT, BATCH, format_error(), entry(), pause_end(), limit(),
-- day(), cut(), scan(), load(), expire(), fit(), append(), save().
-- Needs: nothing; the script that follows it reads its own clock (fast.lua
-- or clock.lua, prepended before this part).
--
-- Each bucket window of a scope has three keys: a log, a list of
-- "<µs>:<units>:<id>" entries oldest first, one per admitted call whatever
-- its units; its sum, an integer, the units counted; and a meta string
-- "<until>:<head>:<exp>:<format>" followed by ";<id>=<end>:<units>" per
-- lease: until when fast.lua may decide on this window alone (16 digits,
-- zero padded: fast.lua compares it as text), the instant of the oldest
-- entry, the instant the keys expire, the Redis format (keys.go), and the
-- leases (lease.lua).
-- A lease counts in the sum from the moment it is taken, and leaves the
-- window as an entry dated at its end would: the units a process spends
-- from it at any instant of its life stay counted a full window after that
-- instant, and it is not in the log, so it never makes later callers queue
-- behind its end.
-- An entry is appended at an instant no earlier than the newest entry of
-- every log it joins, so each log stays sorted by time: expired entries
-- leave from the head, and the units in a window are read from the sum,
-- never counted. Entries that have left the window may stay in the log, and
-- in the sum, for a while (see reserve.lua): the sum is then more than the
-- window holds, never less.
--
-- A pause is a key holding the instant spending may resume, one per bucket
-- and one for the whole scope, read with the metas and sums in one MGET.
--
-- Every value is read strictly: a meta, sum, entry or pause that is not
-- exactly of this format stops the script with a FORMAT error rather than
-- being taken for missing, so that a process never misreads state written
-- by another format of tollgate sharing the Redis.
--
-- Timestamps are integer microseconds. Lua numbers are doubles, exact up to
-- 2^53 µs (the year 2255). Numbers become strings through
-- string.format('%d'), never tostring or '..', which print %.14g in Redis.
--
-- A limit L is a table: log, meta, sumkey (keys), window (µs; 0 for a
-- calendar day), bounds (ascending midnights in µs, for a calendar day),
-- and once read: sum, tail, head (0: no entry), exp, leases ({id, e, u}
-- each), leased (their units).

-- The format this file reads and writes; keys.go says when it changes.
local FORMAT = '1'

local BATCH = 128

-- Stop the script: what key holds is not of this format. The limiter
-- finds the message by its "FORMAT tollgate: " start, whatever Redis wraps
-- around a script's error.
local function format_error(key, what)
  error('FORMAT tollgate: ' .. key .. ' holds ' .. what ..
    ' of a Redis format this tollgate cannot read (it reads format ' .. FORMAT .. ')', 0)
end

-- The instant and units of an entry of log.
local function entry(log, e)
  local ts, units = string.match(e, '^(%d+):(%d+):')
  if not ts then format_error(log, 'an entry') end
  return tonumber(ts), tonumber(units)
end

-- The instant a pause key holds, or nil when it is not set.
local function pause_end(key, v)
  if not v then return nil end
  local u = string.match(v, '^%d+$')
  if not u then format_error(key, 'a pause') end
  return tonumber(u)
end

-- A limit of the window named by span: its length in µs, or for a calendar
-- day the midnights around the caller's clock, ascending and joined by
-- commas.
local function limit(log, meta, sumkey, span)
  local L = {log = log, meta = meta, sumkey = sumkey, window = tonumber(span), bounds = {}}
  if L.window then return L end
  L.window = 0
  for b in string.gmatch(span, '%d+') do L.bounds[#L.bounds + 1] = tonumber(b) end
  return L
end

-- The calendar day holding instant t: its start and end, or nil when t lies
-- outside the midnights the caller sent.
local function day(L, t)
  local b = L.bounds
  for j = #b - 1, 1, -1 do
    if b[j] <= t then
      if t < b[j + 1] then return b[j], b[j + 1] end
      return nil
    end
  end
  return nil
end

-- An entry dated ts still counts at instant t when ts > cut(L, t); nil when
-- t lies outside the calendar sent.
local function cut(L, t)
  if L.window > 0 then return t - L.window end
  local start = day(L, t)
  if not start then return nil end
  return start - 1
end

-- Call f(ts, units) on the entries, oldest first, until it returns a value.
local function scan(L, f)
  local from = 0
  while true do
    local batch = redis.call('LRANGE', L.log, from, from + BATCH - 1)
    for i = 1, #batch do
      local r = f(entry(L.log, batch[i]))
      if r then return r end
    end
    if #batch < BATCH then return nil end
    from = from + BATCH
  end
end

-- Read a window's meta m and sum s (each a string or false) into L, with
-- the newest entry's instant from the log. When either is missing (never
-- written, or evicted), rebuild both from the log and mark L dirty so that
-- they are written back. A meta without its format field was written
-- before formats were numbered, in this same encoding.
local function load(L, m, s)
  L.leases, L.leased = {}, 0
  if m and s then
    local hd, ex, fmt, rest = string.match(m, '^%d+:(%d+):(%d+)(:?%d*)(.*)$')
    if not hd or (fmt ~= '' and fmt ~= ':' .. FORMAT) or
        string.gsub(rest, ';[^=;]+=%d+:%d+', '') ~= '' then
      format_error(L.meta, 'a meta')
    end
    if not string.match(s, '^%d+$') then format_error(L.sumkey, 'a sum') end
    L.sum, L.head, L.exp, L.tail = tonumber(s), tonumber(hd), tonumber(ex), 0
    for id, e, u in string.gmatch(rest, ';([^=;]+)=(%d+):(%d+)') do
      u = tonumber(u)
      L.leases[#L.leases + 1] = {id = id, e = tonumber(e), u = u}
      L.leased = L.leased + u
    end
    if L.sum > L.leased then
      local last = redis.call('LINDEX', L.log, -1)
      if last then
        L.tail = entry(L.log, last)
      else
        -- The log is gone (evicted): its sum still counts until its
        -- oldest entry would have left, when expire() finds it empty.
        L.tail = L.head
      end
    end
    return
  end
  L.sum, L.tail, L.head, L.exp, L.dirty = 0, 0, 0, 0, true
  scan(L, function(ts, units)
    if L.sum == 0 then L.head = ts end
    L.tail = ts
    L.sum = L.sum + units
  end)
end

-- Drop what no longer counts at cut c: the leases whose end is at or
-- before c, and the entries dated so: all of them when all is set (the
-- room is needed), else one batch.
local function expire(L, c, all)
  if L.leased > 0 then
    local kept, leased = {}, 0
    for _, x in ipairs(L.leases) do
      if x.e > c then
        kept[#kept + 1] = x
        leased = leased + x.u
      else
        L.sum, L.dirty = L.sum - x.u, true
      end
    end
    L.leases, L.leased = kept, leased
  end
  local listed = L.sum - L.leased
  if listed <= 0 then
    if L.head ~= 0 or listed < 0 then L.dirty = true end
    L.sum, L.head = L.leased, 0
    return
  end
  if L.head > c then return end
  L.dirty = true
  if L.tail <= c then
    -- Every entry has left: drop the log at once.
    redis.call('UNLINK', L.log)
    L.sum, L.head = L.leased, 0
    return
  end
  repeat
    local batch = redis.call('LRANGE', L.log, 0, BATCH - 1)
    local k = 0
    for i = 1, #batch do
      local ts, units = entry(L.log, batch[i])
      if ts > c then break end
      k = i
      listed = listed - units
    end
    if k > 0 then redis.call('LTRIM', L.log, k, -1) end
    if k < #batch then
      L.head = entry(L.log, batch[k + 1])
    elseif #batch < BATCH then
      listed = 0 -- the log is empty; this also heals a sum the log disagrees with
    else
      L.head = entry(L.log, batch[#batch])
    end
  until not all or listed <= 0 or L.head > c
  if listed <= 0 then listed, L.head = 0, 0 end
  L.sum = listed + L.leased
end

-- The earliest instant t >= t0 at which what still counts leaves room for
-- units more. From t0 on nothing enters the window (no entry is dated after
-- t0, and a lease ends by its end), so the first instant that fits is the
-- one at which enough of the earliest to leave have left: entries and
-- leases, in the order they leave. nil: beyond the calendar sent.
local function fit(L, t0, units)
  if L.window > 0 then
    local excess = L.sum + units - L.units
    if excess <= 0 then return t0 end
    local ls = {}
    for i, x in ipairs(L.leases) do ls[i] = x end
    table.sort(ls, function(x, y) return x.e < y.e end)
    local gone, last, li = 0, 0, 1
    local function leases_until(ts)
      while li <= #ls and ls[li].e <= ts do
        gone, last, li = gone + ls[li].u, math.max(last, ls[li].e), li + 1
        if gone >= excess then return last + L.window end
      end
    end
    local t = scan(L, function(ts, u)
      local lt = leases_until(ts)
      if lt then return lt end
      gone, last = gone + u, math.max(last, ts)
      if gone >= excess then return last + L.window end
    end) or leases_until(math.huge) or (math.max(L.tail, last) + L.window)
    if t < t0 then t = t0 end
    return t
  end
  local start, finish = day(L, t0)
  if not start then return nil end
  local counted = L.sum
  if L.head ~= 0 and L.head < start then
    -- t0 lies in a later day than some entries: those no longer count.
    scan(L, function(ts, u)
      if ts >= start then return true end
      counted = counted - u
    end)
  end
  for _, x in ipairs(L.leases) do
    if x.e < start then counted = counted - x.u end
  end
  if counted + units <= L.units then return t0 end
  if not day(L, finish) then return nil end
  return finish
end

-- Write the meta and sum back, and push the keys' expiry back when it
-- would come before every entry and lease has left its window. The meta's
-- until tells fast.lua how long it may decide on this window alone: never
-- while a hold waits (it must queue behind it) or the log is empty, and
-- otherwise until the oldest entry is due for trimming (or its day ends),
-- while the TTL reaches past the window of an entry written at now.
local function save(L, now)
  if L.sum <= 0 then
    redis.call('DEL', L.meta, L.sumkey)
    return
  end
  local latest = L.tail
  for _, x in ipairs(L.leases) do
    if x.e > latest then latest = x.e end
  end
  local needed
  if L.window > 0 then
    needed = latest + L.window + 1000000
  else
    local _, finish = day(L, latest)
    needed = (finish or (latest + 86400000000)) + 1000000
  end
  local refresh = needed > L.exp
  if refresh then
    local margin = L.window
    if margin < 1000000 then margin = 1000000 end
    L.exp = needed + margin
  end
  local till = 0
  if L.head ~= 0 and L.tail <= now then
    if L.window > 0 then
      till = math.min(L.head + 2 * L.window, L.exp - L.window - 1000000)
    else
      local _, finish = day(L, L.head)
      till = math.min(finish or now, L.exp - 1000000)
    end
  end
  local parts = {string.format('%016d:%d:%d:', till, L.head, L.exp), FORMAT}
  for _, x in ipairs(L.leases) do
    parts[#parts + 1] = string.format(';%s=%d:%d', x.id, x.e, x.u)
  end
  local meta, sum = table.concat(parts), string.format('%d', L.sum)
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

-- Append an entry of units dated at, no earlier than the log's newest, to
-- L's log, and write L back.
local function append(L, at, units, id, now)
  if redis.call('RPUSH', L.log, string.format('%d:%d:', at, units) .. id) == 1 then
    L.exp = 0 -- a new list: it has no TTL yet
  end
  if L.head == 0 then L.head = at end
  L.sum = L.sum + units
  L.tail = at
  save(L, now)
end
