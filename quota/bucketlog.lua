-- bucketlog.lua: token buckets (bucket.lua) in every script that decides
-- on windows, through the functions log.lua provides, so that the general
-- decision (decide.lua), record, cancel, settle and inspect take a bucket
-- as one more limit: checked and counted in the same atomic step as the
-- windows, all or nothing.
--
-- Provides: limit(), load(), cut(), expire(), fit(), append(), save(),
-- find(), change(), scan(), each log.lua's for a window and the bucket's
-- for a limit whose span is a bucket's ("r" and bucket.lua's SPAN).
-- Needs: log.lua, bucket.lua. It comes right after log.lua, so that the
-- parts after it call these.
--
-- A bucket L carries what decide.lua reads of a window: sum (the units
-- out of the bucket at the decision's instant, which cut() sets), tail
-- (its newest call: holds queue behind it, as behind a window's newest
-- entry), no head, lease or pause of its own (it reads the pause keys
-- like any window of the general decision), units (its capacity, C).

local log_limit, log_load, log_cut, log_expire, log_fit = limit, load, cut, expire, fit
local log_append, log_save, log_find, log_change, log_scan = append, save, find, change, scan

-- The script's clock: every script's ARGV[1] (see clock.lua).
local function script_now()
  if ARGV[1] ~= '' then return tonumber(ARGV[1]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function limit(log, meta, span)
  if string.byte(span, 1) ~= 114 then return log_limit(log, meta, span) end -- 'r'
  local L = bucket_limit(meta, span)
  L.meta, L.log, L.window, L.bounds = meta, log, 0, {}
  L.sum, L.leased, L.leases, L.head, L.pz, L.buf = 0, 0, {}, 0, 0, {}
  L.open, L.origin, L.slice = {s = 0, t = 0, u = 0}, 0, 0
  return L
end

local function load(L, m)
  if not L.bucket then return log_load(L, m) end
  bucket_read(L, m)
  L.sum, L.fresh = math.ceil(L.s / L.P), not m -- at u; cut() reads it at the decision's instant
end

local function cut(L, t)
  if not L.bucket then return log_cut(L, t) end
  L.sum, L.now = bucket_used(L, t), t
  if L.C == nil and L.units then L.C = L.units end
  return t
end

local function expire(L, c, all)
  if not L.bucket then return log_expire(L, c, all) end
end

local function fit(L, t0, units)
  if not L.bucket then return log_fit(L, t0, units) end
  L.C = L.units
  return bucket_fit(L, t0, units)
end

-- A record announce.lua keeps beside a window's leases ("~a": units an
-- upstream announced as spent beyond the count) is, in a bucket, units
-- spent now: its debt grows by them, and the bucket refills them as the
-- upstream's does. It is a level as in a window: the next reading of the
-- same announcement finds the bucket holding no more than announced, and
-- records nothing. (Leases are not taken on buckets: see Limiter.Lease.)
local function save(L, now)
  if not L.bucket then return log_save(L, now) end
  if not L.recorded then
    for _, x in ipairs(L.leases) do
      if x.id == '~a' and x.u > 0 then bucket_extra(L, 0, x.u, now) end
    end
    L.recorded = true
  end
  bucket_write(L, now)
  L.dirty = false
end

local function append(L, at, units, now)
  if not L.bucket then return log_append(L, at, units, now) end
  local q = L.upstream and at > now and bucket_queue_add(L, at, units, now)
  bucket_admit(L, at, units)
  if q then bucket_queue_write(L, q, now) end
  L.sum = bucket_used(L, now)
  save(L, now)
end

local function scan(L, f)
  if not L.bucket then return log_scan(L, f) end
  return nil
end

-- A call's units are always found in a bucket that holds any: where it
-- was counted does not matter, only when (see bucket_refund). A full
-- bucket holds none; one that refunds as its upstream still counts what
-- the upstream charges past a call's estimate when it ends.
local function find(L, at)
  if not L.bucket then return log_find(L, at) end
  if L.u == 0 and L.s == 0 and not L.upstream then return nil end
  L.found = at
  return 0
end

local function change(L, where, delta)
  if not L.bucket then return log_change(L, where, delta) end
  L.dirty = true
  if delta < 0 and L.upstream and L.found <= script_now() then
    -- Refunded as the upstream refunds; a cancel gives nothing back
    -- (bucket.lua).
    if L.cancelling then return 0 end
    return -bucket_return(L, L.found, -delta, script_now())
  end
  if delta < 0 then return -bucket_refund(L, L.found, -delta) end
  return bucket_extra(L, L.found, delta, script_now())
end
