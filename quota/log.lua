-- log.lua: the weighted sliding log, shared by the scripts that follow it
-- (the Go side prepends it to reserve.lua and usage.lua).
--
-- Each bucket window of a scope has a log, a list of "<µs>:<cost>:<id>"
-- entries oldest first, and a meta string "<sum>:<tail>:<head>" beside it:
-- the units in the log and the instants of its newest and oldest entries.
-- One entry per admitted call, whatever its cost. An entry is appended at an
-- instant no earlier than the newest entry of every log it joins, so each log
-- stays sorted by time: expired entries leave from the head, and the units in
-- a window are read from the sum, never counted.
--
-- Timestamps are integer microseconds. Lua numbers are doubles, exact up to
-- 2^53 µs (the year 2255). Numbers become strings through
-- string.format('%d'), never tostring or '..', which print %.14g in Redis.
--
-- A limit L is a table: log, meta (keys), window (µs; 0 for a calendar
-- day), bounds (ascending midnights in µs, for a calendar day), and after
-- load: sum, tail, head.

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

-- Read a limit from ARGV starting at index a: window, nb, nb boundaries.
-- Returns the limit and the index after it.
local function limit(log, meta, a)
  local L = {log = log, meta = meta, window = tonumber(ARGV[a]), bounds = {}}
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

-- Read the meta into L; when it is missing or unreadable, rebuild it from
-- the log and mark L dirty so that it is written back.
local function load(L)
  local m = redis.call('GET', L.meta)
  if m then
    local s, tl, hd = string.match(m, '^(%d+):(%d+):(%d+)$')
    if s then
      L.sum, L.tail, L.head = tonumber(s), tonumber(tl), tonumber(hd)
      return
    end
  end
  L.sum, L.tail, L.head, L.dirty = 0, 0, 0, true
  scan(L, function(ts, cost)
    if L.sum == 0 then L.head = ts end
    L.tail = ts
    L.sum = L.sum + cost
  end)
end
