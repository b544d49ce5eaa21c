-- fast.lua: the start of reserve (before log.lua and reserve.lua), and the
-- common decision, taken before the general code is even defined.
--
-- It reads the clock and, in one MGET, every window's meta and sum and the
-- pauses of its buckets and scope. A meta opens with an instant until which
-- its window needs no care: no hold waits, no entry is old enough to trim,
-- no day has ended, the TTL reaches past a new entry's window (reserve.lua's
-- save() sets it, to 0 while holds wait). Before that instant, when every
-- limit has room now (counting entries that may have left the window, so
-- the sum is if anything too high) and no pause is set, the call is
-- recorded with one RPUSH and one INCRBY per window. Otherwise it falls
-- through to reserve.lua, which decides the same way in every case; `now`,
-- `n`, `nread` and `read` carry over.
--
-- This path is what most decisions cost Redis, so it avoids what Lua makes
-- slow: tonumber() parses with strtod, a table reply is walked field by
-- field, string.format is a C call. The instant stays the string `stamp`,
-- compared with the meta's until as text: both are 16 digits (µs from 2001
-- to 2286; save() pads until), and digit strings of one length sort as their
-- numbers do in every collation. The check against each limit reads the
-- sum against room, units less cost, sent by the caller. The reply is one
-- string, "<now>:<sum_1>:...:<sum_n>" with the sums before this call, from
-- which the caller works out what remains.
--
-- KEYS and ARGV are reserve.lua's; its reply is the other form.

local stamp
if ARGV[1] == '' then
  local t = redis.call('TIME')
  stamp = t[1] .. string.sub('00000' .. t[2], -6)
else
  stamp = ARGV[1]
end
local n = (#ARGV - 3) / 3
local nread = #KEYS - n -- the metas and sums, then the pauses; the logs follow
local read = redis.call('MGET', unpack(KEYS, 1, nread))

local fast = #stamp == 16 and ARGV[2] ~= '-2'
for i = 2 * n + 1, nread do
  if read[i] then fast = false end
end
if fast then
  for i = 1, n do
    local m, s = read[2 * i - 1], read[2 * i]
    local sum = s and tonumber(s)
    if not m or not sum or string.sub(m, 1, 16) <= stamp or sum > tonumber(ARGV[3 * i + 2]) then
      fast = false
      break
    end
  end
end
if fast then
  local id, reply = ARGV[3], stamp
  for i = 1, n do
    local log, cost = KEYS[nread + i], ARGV[3 * i + 1]
    if redis.call('RPUSH', log, stamp .. ':' .. cost .. ':' .. id) == 1 then
      -- The log had gone (evicted) while its meta stayed: a new list has
      -- no TTL, so give it the meta's.
      redis.call('PEXPIRE', log, redis.call('PTTL', KEYS[2 * i - 1]))
    end
    redis.call('INCRBY', KEYS[2 * i], cost)
    reply = reply .. ':' .. read[2 * i]
  end
  return reply
end
local now = tonumber(stamp)
-- log.lua: the weighted sliding log, shared by the scripts that follow it
-- (the Go side prepends it to reserve.lua after fast.lua, and to usage.lua
-- and pause.lua).
--
-- Each bucket window of a scope has three keys: a log, a list of
-- "<µs>:<cost>:<id>" entries oldest first, one per admitted call whatever
-- its cost; its sum, an integer, the units counted; and a meta string
-- "<until>:<head>:<exp>" followed by ";<id>=<end>:<units>" per lease:
-- until when fast.lua may decide on this window alone (16 digits, zero
-- padded: fast.lua compares it as text), the instant of the oldest entry,
-- the instant the keys expire, and the leases (lease.lua).
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
-- Timestamps are integer microseconds. Lua numbers are doubles, exact up to
-- 2^53 µs (the year 2255). Numbers become strings through
-- string.format('%d'), never tostring or '..', which print %.14g in Redis.
--
-- A limit L is a table: log, meta, sumkey (keys), window (µs; 0 for a
-- calendar day), bounds (ascending midnights in µs, for a calendar day),
-- and once read: sum, tail, head (0: no entry), exp, leases ({id, e, u}
-- each), leased (their units).

local BATCH = 128

-- The instant and cost of an entry.
local function entry(e)
  local ts, cost = string.match(e, '^(%d+):(%d+):')
  return tonumber(ts), tonumber(cost)
end

-- The decision's clock: the caller's, when it sent one, else the server's.
local function clock(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
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

-- Call f(ts, cost) on the entries, oldest first, until it returns a value.
local function scan(L, f)
  local from = 0
  while true do
    local batch = redis.call('LRANGE', L.log, from, from + BATCH - 1)
    for i = 1, #batch do
      local ts, cost = entry(batch[i])
      local r = f(ts, cost)
      if r then return r end
    end
    if #batch < BATCH then return nil end
    from = from + BATCH
  end
end

-- Read a window's meta m and sum s (each a string or false) into L, with
-- the newest entry's instant from the log. When either is missing or
-- unreadable, rebuild both from the log and mark L dirty so that they are
-- written back.
local function load(L, m, s)
  L.leases, L.leased = {}, 0
  if m and s and tonumber(s) then
    local hd, ex, rest = string.match(m, '^%d+:(%d+):(%d+)(.*)$')
    if hd then
      L.sum, L.head, L.exp, L.tail = tonumber(s), tonumber(hd), tonumber(ex), 0
      for id, e, u in string.gmatch(rest, ';([^=;]+)=(%d+):(%d+)') do
        u = tonumber(u)
        L.leases[#L.leases + 1] = {id = id, e = tonumber(e), u = u}
        L.leased = L.leased + u
      end
      if L.sum > L.leased then
        local last = redis.call('LINDEX', L.log, -1)
        if last then
          L.tail = entry(last)
        else
          -- The log is gone (evicted): its sum still counts until its
          -- oldest entry would have left, when expire() finds it empty.
          L.tail = L.head
        end
      end
      return
    end
  end
  L.sum, L.tail, L.head, L.exp, L.dirty = 0, 0, 0, 0, true
  scan(L, function(ts, cost)
    if L.sum == 0 then L.head = ts end
    L.tail = ts
    L.sum = L.sum + cost
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
      local ts, cost = entry(batch[i])
      if ts > c then break end
      k = i
      listed = listed - cost
    end
    if k > 0 then redis.call('LTRIM', L.log, k, -1) end
    if k < #batch then
      L.head = entry(batch[k + 1])
    elseif #batch < BATCH then
      listed = 0 -- the log is empty; this also heals a sum the log disagrees with
    else
      L.head = entry(batch[#batch])
    end
  until not all or listed <= 0 or L.head > c
  if listed <= 0 then listed, L.head = 0, 0 end
  L.sum = listed + L.leased
end

-- The earliest instant t >= t0 at which what still counts leaves room for
-- cost. From t0 on nothing enters the window (no entry is dated after
-- t0, and a lease ends by its end), so the first instant that fits is the
-- one at which enough of the earliest to leave have left: entries and
-- leases, in the order they leave. nil: beyond the calendar sent.
local function fit(L, t0, cost)
  if L.window > 0 then
    local excess = L.sum + cost - L.units
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
    local t = scan(L, function(ts, c)
      local lt = leases_until(ts)
      if lt then return lt end
      gone, last = gone + c, math.max(last, ts)
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
    scan(L, function(ts, c)
      if ts >= start then return true end
      counted = counted - c
    end)
  end
  for _, x in ipairs(L.leases) do
    if x.e < start then counted = counted - x.u end
  end
  if counted + cost <= L.units then return t0 end
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
  local parts = {string.format('%016d:%d:%d', till, L.head, L.exp)}
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
