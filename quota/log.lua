-- log.lua: the weighted sliding log, shared by the scripts that follow it
-- (the Go side prepends it to reserve.lua after fast.lua, and to usage.lua
-- and pause.lua).
--
-- Each bucket window of a scope has three keys: a log, a list of
-- "<µs>:<cost>:<id>" entries oldest first, one per admitted call whatever
-- its cost; its sum, an integer, the units in the log; and a meta string
-- "<until>:<head>:<exp>": until when fast.lua may decide on this window
-- alone, the instant of the oldest entry, and the instant the keys expire.
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
-- and once read: sum, tail, head, exp.

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

-- Read a limit's window from ARGV starting at index a: its length in µs,
-- and for a calendar day (length 0) the count of midnights and the
-- midnights. Returns the limit and the index after it.
local function limit(log, meta, sumkey, a)
  local L = {log = log, meta = meta, sumkey = sumkey, window = tonumber(ARGV[a]), bounds = {}}
  if L.window > 0 then return L, a + 1 end
  local nb = tonumber(ARGV[a + 1])
  for j = 1, nb do L.bounds[j] = tonumber(ARGV[a + 1 + j]) end
  return L, a + 2 + nb
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
  if m and s then
    local hd, ex = string.match(m, '^%d+:(%d+):(%d+)$')
    if hd then
      L.sum, L.head, L.exp, L.tail = tonumber(s), tonumber(hd), tonumber(ex), 0
      if L.sum > 0 then
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
