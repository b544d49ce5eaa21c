-- log.lua: the weighted sliding log, shared by the scripts that decide,
-- record, settle, read usage and lease.
--
-- Provides: FORMAT, BATCH, format_error(), entry(), pause_end(), limit(),
-- day(), cut(), slice_of(), scan(), load(), expire(), fit(), append(),
-- save(), find(), change().
-- Needs: nothing; the script that follows it reads its own clock (fast.lua
-- or clock.lua, prepended before this part).
--
-- Each bucket window of a scope has two keys. Its log is a list of
-- "<µs>:<units>" entries, oldest first: the calls admitted in one slice of
-- the window (a thousandth of it, no finer than a millisecond; of a
-- calendar day, from its midnight) summed into one entry dated at the
-- latest of them, so that each counts at least as long as it would alone.
-- Its meta is one string,
--
--   "#2:<until>:<end>:<sum>:<units>:<at>:<head>:<exp>:<origin>:<slice>"
--
-- then ";<id>=<end>:<units>" per lease: until when fast.lua may decide on
-- this window alone; the end of the open slice (0: none), the newest, kept
-- in the meta until a call falls in a later slice and it joins the log
-- (both 16 digits, zero padded: fast.lua compares them as text); the units
-- counted (entries, the open slice and leases); the open slice's units and
-- the instant of its latest call; the instant of the oldest entry (0:
-- none); the instant the keys expire; and the slice grid (slices start at
-- origin, 0 for a sliding window, the day's midnight for a calendar day,
-- plus whole slices). The fields a common decision changes come first,
-- and it writes one key. A window's memory is bounded by its
-- slices, whatever the call rate; a call may wait at most one slice longer
-- than it would with an entry of its own.
--
-- A lease counts in the sum from the moment it is taken, and leaves the
-- window as an entry dated at its end would: the units a process spends
-- from it at any instant of its life stay counted a full window after that
-- instant, and it is not in the log, so it never makes later callers queue
-- behind its end. Records "~a" (announce.lua) count the same way.
--
-- An entry is appended at an instant no earlier than the newest entry of
-- every log it joins, so each log stays sorted by time: expired entries
-- leave from the head, and the units in a window are read from the sum,
-- never counted. Entries that have left the window may stay in the log, and
-- in the sum, for a while (see reserve.lua): the sum is then more than the
-- window holds, never less. A call's units are found again (to give back or
-- settle) in the first entry dated at or after its instant, when that
-- entry lies in the call's slice.
--
-- A pause is a key holding the instant spending may resume, one per bucket
-- and one for the whole scope, read with the metas in one MGET.
--
-- Every value is read strictly: a meta, entry or pause that is not exactly
-- of this format stops the script with a FORMAT error rather than being
-- taken for missing, so that a process never misreads state written by
-- another format of tollgate sharing the Redis. State of format 1 (a meta
-- of digits, a sum key beside it, entries with an id) is read exactly and
-- rewritten in this format when next saved.
--
-- Timestamps are integer microseconds. Lua numbers are doubles, exact up to
-- 2^53 µs (the year 2255). Numbers become strings through
-- string.format('%d'), never tostring or '..', which print %.14g in Redis.
--
-- A limit L is a table: log, meta (keys), window (µs; 0 for a calendar
-- day), bounds (ascending midnights in µs, for a calendar day), and once
-- read: sum, tail (the newest entry's instant), head (0: no entry), exp,
-- origin, slice, open ({s = start, t = instant, u = units}), leases
-- ({id, e, u} each), leased (their units), legacy (a format-1 sum key to
-- delete).

-- The format this file reads and writes; keys.go says when it changes.
local FORMAT = '2'

local BATCH = 128

-- The most batches of entries one call trims: a window's slices twice
-- over, which is all a log of this format can hold; a longer log (carried
-- over from format 1) is trimmed over several calls.
local TRIM_BATCHES = 16

-- How many slices a window holds, and the shortest slice (µs).
local SLICES, MIN_SLICE = 1000, 1000

-- Stop the script: what key holds is not of this format. The limiter
-- finds the message by its "FORMAT tollgate: " start, whatever Redis wraps
-- around a script's error.
local function format_error(key, what)
  error('FORMAT tollgate: ' .. key .. ' holds ' .. what ..
    ' of a Redis format this tollgate cannot read (it reads format ' .. FORMAT .. ')', 0)
end

-- The instant and units of an entry of log ("<µs>:<units>", or format 1's
-- "<µs>:<units>:<id>").
local function entry(log, e)
  local ts, units = string.match(e, '^(%d+):(%d+)$')
  if not ts then ts, units = string.match(e, '^(%d+):(%d+):[^:]+$') end
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
local function limit(log, meta, span)
  local L = {log = log, meta = meta, window = tonumber(span), bounds = {}}
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

-- The slice holding instant t: its start, the grid's origin and the slice
-- length; nil when t lies outside the calendar sent (its call then has an
-- entry of its own).
local function slice_of(L, t)
  local origin, length = 0, L.window
  if length == 0 then
    local start, finish = day(L, t)
    if not start then return nil end
    origin, length = start, finish - start
  end
  length = math.max(math.floor(length / SLICES), MIN_SLICE)
  return origin + math.floor((t - origin) / length) * length, origin, length
end

-- Call f(ts, units) on the entries, oldest first, the open slice last,
-- until it returns a value.
local function scan(L, f)
  local from = 0
  while true do
    local batch = redis.call('LRANGE', L.log, from, from + BATCH - 1)
    for i = 1, #batch do
      local r = f(entry(L.log, batch[i]))
      if r then return r end
    end
    if #batch < BATCH then break end
    from = from + BATCH
  end
  if L.open.u > 0 then return f(L.open.t, L.open.u) end
  return nil
end

-- Read a window's meta m (a string, or false) into L. A missing meta
-- (never written, or evicted) is rebuilt from the log, and L marked dirty
-- so that it is written back.
local function load(L, m)
  L.leases, L.leased, L.open, L.origin, L.slice = {}, 0, {s = 0, t = 0, u = 0}, 0, 0
  local rest
  if m and string.sub(m, 1, 3) == '#2:' then
    local til, en, sum, ou, ot, hd, ex, og, sl
    til, en, sum, ou, ot, hd, ex, og, sl, rest = string.match(m,
      '^#2:(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+)(.*)$')
    if not til then format_error(L.meta, 'a meta') end
    L.sum, L.head, L.exp = tonumber(sum), tonumber(hd), tonumber(ex)
    L.origin, L.slice = tonumber(og), tonumber(sl)
    en = tonumber(en)
    L.open = {s = en > 0 and en - L.slice or 0, t = tonumber(ot), u = tonumber(ou)}
  elseif m then
    -- Format 1: "<until>:<head>:<exp>[:1]", the sum in a key of its own,
    -- and no open slice. Its sum key is named as the meta's.
    local hd, ex, fmt
    hd, ex, fmt, rest = string.match(m, '^%d+:(%d+):(%d+)(:?%d*)(.*)$')
    L.legacy = string.gsub(L.meta, ':meta$', ':sum')
    local s = redis.call('GET', L.legacy)
    if not hd or (fmt ~= '' and fmt ~= ':1') or not s or not string.match(s, '^%d+$') then
      format_error(L.meta, 'a meta')
    end
    L.sum, L.head, L.exp, L.dirty = tonumber(s), tonumber(hd), tonumber(ex), true
  end
  if rest then
    if string.gsub(rest, ';[^=;]+=%d+:%d+', '') ~= '' then format_error(L.meta, 'a meta') end
    for id, e, u in string.gmatch(rest, ';([^=;]+)=(%d+):(%d+)') do
      u = tonumber(u)
      L.leases[#L.leases + 1] = {id = id, e = tonumber(e), u = u}
      L.leased = L.leased + u
    end
    L.tail = 0
    if L.open.u > 0 then
      L.tail = L.open.t
    elseif L.sum > L.leased then
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
-- before c, and the entries dated so: all of them (up to TRIM_BATCHES)
-- when all is set (the room is needed), else one batch. Entries left
-- counted in the sum make it too high, never too low; fit() still finds
-- the instant their units leave.
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
  local listed = L.sum - L.leased - L.open.u -- the units in the list
  if L.sum - L.leased <= 0 then
    if L.head ~= 0 or L.sum < L.leased then L.dirty = true end
    L.sum, L.head, L.open.u = L.leased, 0, 0
    return
  end
  if L.head > c then return end
  L.dirty = true
  if L.tail <= c then
    -- Every entry has left: drop the log and the open slice at once.
    redis.call('UNLINK', L.log)
    L.sum, L.head, L.open.u = L.leased, 0, 0
    return
  end
  local empty, batches = false, 0
  repeat
    batches = batches + 1
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
      empty = true -- this also heals a sum the log disagrees with
    else
      L.head = entry(L.log, batch[#batch])
    end
  until not all or empty or L.head > c or batches >= TRIM_BATCHES
  if empty or listed < 0 then
    listed = 0
    L.head = L.open.u > 0 and L.open.t or 0
  end
  L.sum = listed + L.open.u + L.leased
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

-- Write the meta back, and push the keys' expiry back when it would come
-- before every entry and lease has left its window. The meta's until
-- tells fast.lua how long it may decide on this window alone: never while
-- a hold waits (it must queue behind it) or the log is empty, and
-- otherwise until the oldest entry is due for trimming (or its day ends),
-- while the TTL reaches past the window of an entry written at now.
local function save(L, now)
  if L.legacy then redis.call('DEL', L.legacy) end
  if L.sum <= 0 then
    redis.call('DEL', L.meta)
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
  if L.head ~= 0 and L.tail <= now and L.slice > 0 then
    if L.window > 0 then
      till = math.min(L.head + 2 * L.window, L.exp - L.window - 1000000)
    else
      local _, finish = day(L, L.head)
      till = math.min(finish or now, L.exp - 1000000)
    end
  end
  local parts = {string.format('#2:%016d:%016d:%d:%d:%d:%d:%d:%d:%d', till,
    L.open.s > 0 and L.open.s + L.slice or 0, L.sum, L.open.u, L.open.t, L.head, L.exp,
    L.origin, L.slice)}
  for _, x in ipairs(L.leases) do
    parts[#parts + 1] = string.format(';%s=%d:%d', x.id, x.e, x.u)
  end
  local meta = table.concat(parts)
  if refresh then
    local ms = math.floor((L.exp - now) / 1000)
    redis.call('SET', L.meta, meta, 'PX', ms)
    redis.call('PEXPIRE', L.log, ms)
  else
    redis.call('SET', L.meta, meta, 'KEEPTTL')
  end
end

-- Count units dated at (no earlier than the log's newest) in L: in the
-- open slice when at falls in it, else in a new open slice, the old one
-- joining the log; then write L back.
local function append(L, at, units, now)
  local s, origin, length = slice_of(L, at)
  if not s or s ~= L.open.s or origin ~= L.origin or length ~= L.slice then
    if L.open.u > 0 then
      if redis.call('RPUSH', L.log, string.format('%d:%d', L.open.t, L.open.u)) == 1 then
        L.exp = 0 -- a new list: it has no TTL yet
      end
    end
    L.open = {s = s or 0, t = at, u = 0}
    L.origin, L.slice = origin or 0, length or 0
  end
  L.open.t, L.open.u = at, L.open.u + units
  if L.head == 0 then L.head = at end
  L.sum = L.sum + units
  L.tail = at
  save(L, now)
end

-- Where the units of a call admitted at instant at are counted: the first
-- entry dated at or after it, when that entry lies in its slice. Returns
-- 0 for the open slice, the entry's index in the log (from 0), or nil.
-- A day's or fixed window's slices start at its own start, read from the
-- span sent, not the meta's grid: that is the newest entry's, which a hold
-- in a later window moves there while the calls before it still count.
local function find(L, at)
  if L.sum <= L.leased then return nil end
  local s, origin, length
  if L.window == 0 then
    s, origin, length = slice_of(L, at)
    if not s then return nil end -- beyond the days sent
  else
    if L.slice == 0 then return nil end
    s, length = L.origin + math.floor((at - L.origin) / L.slice) * L.slice, L.slice
  end
  local found, ts = nil, nil
  if L.open.u > 0 and L.open.t >= at then found, ts = 0, L.open.t end
  local n = redis.call('LLEN', L.log)
  local to = n - 1
  while to >= 0 do
    local batch = redis.call('LRANGE', L.log, math.max(to - BATCH + 1, 0), to)
    for i = #batch, 1, -1 do
      local t = entry(L.log, batch[i])
      if t < at then
        to = -1
        break
      end
      found, ts = to - (#batch - i) + 1, t
    end
    if to >= 0 then to = to - BATCH end
  end
  if not found or ts >= s + length then return nil end
  return found
end

-- Change the units of the entry find() returned by delta (no lower than 0),
-- and the sum with them; returns the change made.
local function change(L, where, delta)
  if where == 0 then
    delta = math.max(delta, -L.open.u)
    L.open.u = L.open.u + delta
    if L.open.u == 0 then
      -- The newest entry is the log's again.
      local last = redis.call('LINDEX', L.log, -1)
      L.tail = last and entry(L.log, last) or 0
    end
  else
    local t, u = entry(L.log, redis.call('LINDEX', L.log, where - 1))
    delta = math.max(delta, -u)
    redis.call('LSET', L.log, where - 1, string.format('%d:%d', t, u + delta))
  end
  L.sum = L.sum + delta
  return delta
end
