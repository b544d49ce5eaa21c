-- log.lua: the weighted sliding log, shared by the scripts that decide,
-- record, settle, read usage and lease.
--
-- Provides: FORMAT, BATCH, format_error(), entry(), pause_end(), limit(),
-- day(), cut(), slice_of(), scan(), load(), flush(), expire(), fit(),
-- append(), save(), find(), change().
-- Needs: binary.lua; the script that follows it reads its own clock
-- (fast.lua or clock.lua, prepended before this part).
--
-- Each bucket window of a scope has two keys. Its log is a list of
-- entries (an instant in µs and units), oldest first: the calls admitted in one slice of
-- the window (a thousandth of it, no finer than a millisecond; of a
-- calendar day, from its midnight) summed into one entry dated at the
-- latest of them, so that each counts at least as long as it would alone.
-- An entry is 16 bytes (binary.lua's ENTRY: the instant and the units,
-- big-endian 8-byte integers); format 2 wrote "<µs>:<units>", which is
-- read as well. Its meta is "#3:" then fixed-width fields (binary.lua's
-- META: big-endian 8-byte integers and a byte),
--
--   at, units, sum, end, closed, until, pause, head, exp, origin, slice
--
-- then the closed slices (ENTRY each), then ";<id>=<end>:<units>" per
-- lease: the instant of the open slice's latest call and its units (an
-- entry, once closed); the units counted (entries, closed and open
-- slices, and leases); the end of the open slice (0: none), the newest,
-- kept in the meta until a call falls in a later slice; how many closed
-- slices follow (fewer than BUFFER); until when fast.lua may decide on
-- this window alone; an instant no earlier than the end of any pause in
-- force on the window (0: none; see reach.lua); the instant of the oldest
-- entry (0: none); the instant the keys expire; and the slice grid (slices
-- start at origin, 0 for a sliding window, the day's midnight for a
-- calendar day, plus whole slices). The fields a common decision changes
-- come first. A closed slice is an entry of the log not yet pushed to the
-- list: the entries are the list's, then the closed slices', oldest first.
-- fast.lua closes a slice into the meta, and pushes the closed slices in
-- one RPUSH when BUFFER of them are there; every other script pushes them
-- (flush()) before it changes the list, and with the slice it closes. So a common decision writes one
-- key. A window's memory is bounded by its slices, whatever the call
-- rate; a call may wait at most one slice longer than it would with an
-- entry of its own.
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
-- and one for the whole scope. The general decision reads them; fast.lua
-- reads the meta's pause field instead, which the pause writes into every
-- meta of the windows it stops (reach.lua; the scope's key "windows" lists
-- its metas), and which save() reads from the pause keys when it gives a
-- meta a new expiry or writes one of an earlier format.
--
-- Every value is read strictly: a meta, entry or pause that is not exactly
-- of this format stops the script with a FORMAT error rather than being
-- taken for missing, so that a process never misreads state written by
-- another format of tollgate sharing the Redis. State of format 2 (a meta
-- "#2:<until>:<end>:<sum>:<units>:<at>:<head>:<exp>:<origin>:<slice>" of
-- decimal fields, no pause field, no closed slices) and of format 1 (a
-- meta of digits, a sum key beside it, entries with an id) is read exactly
-- and rewritten in this format when next saved.
--
-- Timestamps are integer microseconds. Lua numbers are doubles, exact up to
-- 2^53 µs (the year 2255). Numbers become strings through
-- string.format('%d'), never tostring or '..', which print %.14g in Redis.
--
-- A limit L is a table: log, meta (keys), window (µs; 0 for a calendar
-- day), bounds (ascending midnights in µs, for a calendar day), and once
-- read: sum, tail (the newest entry's instant), head (0: no entry), exp,
-- origin, slice, open ({s = start, t = instant, u = units}), buf (the
-- closed slices, {t, u} each), pz (the pause field), leases ({id, e, u}
-- each), leased (their units), legacy (a format-1 sum key to delete), fresh
-- (the meta is not of this format, or missing: save() reads the pauses).

-- The format this file reads and writes; keys.go says when it changes.
local FORMAT = '3'

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

-- The instant and units of an entry of log: ENTRY's 16 bytes (the first
-- is 0: instants lie below 2^53), or format 2's "<µs>:<units>", or format
-- 1's "<µs>:<units>:<id>".
local function entry(log, e)
  if #e == 16 and string.byte(e, 1) == 0 then
    local ts, units = sunpack(ENTRY, e)
    if units < 0 then format_error(log, 'an entry') end
    return ts, units
  end
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
  for _, x in ipairs(L.buf) do
    local r = f(x.t, x.u)
    if r then return r end
  end
  if L.open.u > 0 then return f(L.open.t, L.open.u) end
  return nil
end

-- Read a window's meta m (a string, or false) into L. A missing meta
-- (never written, or evicted) is rebuilt from the log, and L marked dirty
-- so that it is written back.
local function load(L, m)
  L.leases, L.leased, L.open, L.origin, L.slice = {}, 0, {s = 0, t = 0, u = 0}, 0, 0
  L.buf, L.pz, L.fresh = {}, 0, true
  local rest
  if m and string.sub(m, 1, 3) == '#3:' then
    if #m < HEAD then format_error(L.meta, 'a meta') end
    local f = {sunpack(META, m, 4)}
    local nb = f[5]
    for k = 1, 11 do
      if f[k] < 0 then format_error(L.meta, 'a meta') end
    end
    if nb >= BUFFER or #m < HEAD + 16 * nb then format_error(L.meta, 'a meta') end
    -- f: at, units, sum, end, closed, until, pause, head, exp, origin, slice
    L.sum, L.pz, L.head, L.exp, L.origin, L.slice = f[3], f[7], f[8], f[9], f[10], f[11]
    L.open = {s = f[4] > 0 and f[4] - L.slice or 0, t = f[1], u = f[2]}
    for k = 1, nb do
      local t, u = sunpack(ENTRY, m, HEAD + 16 * k - 15)
      if t < 0 or u < 0 then format_error(L.meta, 'a meta') end
      L.buf[k] = {t = t, u = u}
    end
    L.fresh = false
    rest = string.sub(m, HEAD + 16 * nb + 1)
  elseif m and string.sub(m, 1, 3) == '#2:' then
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
    elseif #L.buf > 0 then
      L.tail = L.buf[#L.buf].t
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

-- Push the closed slices to the list, as entries of the log (a script
-- that changes the list pushes them first, and saves the meta after).
local function flush(L)
  local nb = #L.buf
  if nb == 0 then return end
  local entries = {}
  for k, x in ipairs(L.buf) do entries[k] = spack(ENTRY, x.t, x.u) end
  if redis.call('RPUSH', L.log, unpack(entries)) == nb then
    L.exp = 0 -- a new list: it has no TTL yet
  end
  L.buf, L.dirty = {}, true
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
  local listed = L.sum - L.leased - L.open.u -- the units in the list and closed slices
  if L.sum - L.leased <= 0 then
    if L.head ~= 0 or L.sum < L.leased or #L.buf > 0 then L.dirty = true end
    L.sum, L.head, L.open.u, L.buf = L.leased, 0, 0, {}
    return
  end
  if L.head > c then return end
  L.dirty = true
  if L.tail <= c then
    -- Every entry has left: drop the log, the closed and open slices.
    redis.call('UNLINK', L.log)
    L.sum, L.head, L.open.u, L.buf = L.leased, 0, 0, {}
    return
  end
  flush(L)
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
  if #L.buf >= BUFFER then flush(L) end
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
  local ms = math.floor((L.exp - now) / 1000)
  if refresh or L.fresh then
    -- A meta new, of an earlier format, or given a new expiry: it learns
    -- the pauses in force (which reach.lua wrote only into the metas then
    -- listed) and is listed, until its expiry, in the scope's windows.
    local scope = string.match(L.meta, '^[^{]*{[^}]*}:')
    local bucket = string.match(L.meta, '^(.*:)[^:]+:meta$')
    if scope and bucket then
      local p = redis.call('MGET', bucket .. 'pause', scope .. 'pause')
      for j, key in ipairs({bucket .. 'pause', scope .. 'pause'}) do
        local u = pause_end(key, p[j])
        if u and u > L.pz then L.pz = u end
      end
      local reg = scope .. 'windows'
      redis.call('ZADD', reg, string.format('%d', L.exp), L.meta)
      if redis.call('PTTL', reg) < ms then redis.call('PEXPIRE', reg, ms) end
    end
  end
  local closed = {}
  for k, x in ipairs(L.buf) do closed[k] = spack(ENTRY, x.t, x.u) end
  local parts = {'#3:', spack(META, L.open.t, L.open.u, L.sum, L.open.s > 0 and L.open.s + L.slice or 0,
    #L.buf, till, L.pz, L.head, L.exp, L.origin, L.slice), table.concat(closed)}
  for _, x in ipairs(L.leases) do
    parts[#parts + 1] = string.format(';%s=%d:%d', x.id, x.e, x.u)
  end
  local meta = table.concat(parts)
  if refresh then
    redis.call('SET', L.meta, meta, 'PX', string.format('%d', ms))
    redis.call('PEXPIRE', L.log, ms)
  else
    redis.call('SET', L.meta, meta, 'KEEPTTL')
  end
  L.fresh = false
end

-- Count units dated at (no earlier than the log's newest) in L: in the
-- open slice when at falls in it, else in a new open slice, the old one
-- joining the log; then write L back.
local function append(L, at, units, now)
  local s, origin, length = slice_of(L, at)
  if not s or s ~= L.open.s or origin ~= L.origin or length ~= L.slice then
    if L.open.u > 0 then
      L.buf[#L.buf + 1] = {t = L.open.t, u = L.open.u}
    end
    flush(L) -- only fast.lua keeps closed slices in the meta
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
-- There, the open slice is found for any instant in its slice, even one
-- after the slice's own (cancel.lua dates it back when a hold leaves).
local function find(L, at)
  if L.sum <= L.leased then return nil end
  flush(L)
  local s, origin, length
  if L.window == 0 then
    s, origin, length = slice_of(L, at)
    if not s then return nil end -- beyond the days sent
  else
    if L.slice == 0 then return nil end
    s, length = L.origin + math.floor((at - L.origin) / L.slice) * L.slice, L.slice
  end
  local found, ts = nil, nil
  -- A calendar span's open slice holds every unit dated in its slice,
  -- whatever instant it is dated at (cancel.lua may date it back).
  if L.open.u > 0 and (L.open.t >= at or (L.window == 0 and s == L.open.s)) then found, ts = 0, L.open.t end
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
    redis.call('LSET', L.log, where - 1, spack(ENTRY, t, u + delta))
  end
  L.sum = L.sum + delta
  return delta
end
