-- fairreserve.lua: decide a call on buckets with a pace or shares, in one
-- atomic step, as reserve.lua decides any other: now, or as a hold at the
-- earliest instant every limit, pace line and share allows, after every
-- hold already waiting. A call that may not hold (fairroom.lua: a tenant
-- at or above its share, a background call) is admitted now when it is
-- first in the bucket's room, fits now and no hold waits; else it takes
-- its place in the room, or is refused. Its reply is reserve.lua's list,
-- then the place in the room.
--
-- Needs: fairread.lua and readpauses.lua (n, read, nread, names), now.lua
-- (now), log.lua, decide.lua, fair.lua; rooms_of(), which makes room.lua
-- and fairroom.lua and returns fair_room.
--
-- KEYS: meta_1, ..., meta_n, log_1, ..., log_n, tenants_1, ..., tenants_n,
--       then the room: queue, alive, counter, who (fairroom.lua)
-- ARGV: clock, maxwait, charges (reserve.lua's), then per limit: units,
--       room, span (decide.lua's); then per limit: the burst units of its
--       pace ('' for none), and which shares it keeps (0 for none, else
--       k for the k-th below); then the tenant; then how many shares,
--       and per shares: Idle (µs), Lendable (0..1), how many tenants are
--       listed, then each one's name and weight; then the room's: wait
--       ('' for a call that never waits there: a pace alone; '0' to
--       decide once without entering it; else how long, µs, a place
--       lasts unless looked at again; 'leave' to leave it), the waiter
--       (fairroom.lua's name: id, class, tenant), and its class
--       ('background', or '' for interactive).
-- Reply: {admitted, now, at, remaining, by, room_1, ..., room_n, place}:
--   reserve.lua's, then the place in the room from 0, or -1 when the call
--   is not in it. A call in the room is refused (admitted 0) with at the
--   instant it would fit were it first (a hint).

local x = 3 + 3 * n
local tenant = ARGV[x + 2 * n + 1]
local specs, p = {}, x + 2 * n + 3
for k = 1, tonumber(ARGV[x + 2 * n + 2]) do
  local sp = {idle = tonumber(ARGV[p]), lend = tonumber(ARGV[p + 1]), w = {}, listed = 0}
  local listed = tonumber(ARGV[p + 2])
  p = p + 3
  for _ = 1, listed do
    local w = tonumber(ARGV[p + 1])
    sp.w[ARGV[p]] = w
    sp.listed = sp.listed + w
    p = p + 2
  end
  specs[k] = sp
end
local rwait, rid, rclass = ARGV[p], ARGV[p + 1], ARGV[p + 2]
local waiting = rwait ~= '' and rooms_of()(KEYS[3 * n + 1], KEYS[3 * n + 2], KEYS[3 * n + 3], KEYS[3 * n + 4])
if rwait == 'leave' then
  waiting:leave(rid)
  return {0}
end

local maxwait = tonumber(ARGV[2])
local limits = windows(n, n)
local fair = {}
for i, L in ipairs(limits) do
  local b, k = ARGV[x + 2 * i - 1], tonumber(ARGV[x + 2 * i])
  if b ~= '' then L.burst = tonumber(b) end
  if k > 0 then
    L.shares, L.tkey = specs[k], KEYS[2 * n + i]
  end
  if L.window == 0 and not L.bucket and (L.burst or L.shares) then fair[#fair + 1] = i end
end

local t0, by = prepare(limits, read, nread, now, names)
if not t0 then return by end
for _, i in ipairs(fair) do
  local L = limits[i]
  if L.shares then tenants_read(L) end
end
-- The earliest instant every limit allows, then every pace and share;
-- each moves it only later, so a few rounds settle it.
local at, beyond, remaining
local t = t0
for _ = 1, 8 do
  at, beyond, by, remaining = place(limits, t, by)
  if beyond then break end
  local moved = false
  for _, i in ipairs(fair) do
    local f = fair_fit(limits[i], at, tenant, now)
    if not f then
      beyond, by = true, i
      break
    elseif f > at then
      at, by, moved = f, i, true
    end
  end
  if beyond or not moved then break end
  t = at
end
-- Whether the call waits in the room rather than hold: a background
-- call, a tenant at or above its share in a window it is charged to, or
-- one with a call waiting there already.
local roomed = false
if rwait ~= '' then
  roomed = rclass == 'background' or waiting:waits(tenant)
  for _, i in ipairs(fair) do
    local L = limits[i]
    if not roomed and L.shares and not below(L, tenant, now) then roomed = true end
  end
end
-- A request makes its tenant active, admitted or not.
for _, i in ipairs(fair) do
  local L = limits[i]
  if L.shares then
    local me = L.tenants[tenant] or {seen = now, spent = {}}
    me.seen, me.dirty = math.max(me.seen, now), true
    L.tenants[tenant] = me
  end
end
local queued = -1
if roomed then
  -- Now, when first in the room (or it is empty) and the call fits now
  -- behind no hold; else a place in the room.
  waiting:reap(now)
  local spot = waiting:rank(rid)
  local first = spot == 0 or (not spot and waiting:size() == 0)
  if first and not beyond and at == now then
    waiting:leave(rid)
  else
    -- A call that fits in none of the windows sent is refused, as a hold
    -- would be; else it waits its turn, or is refused when it may not.
    if beyond then
      waiting:leave(rid)
    elseif rwait ~= '0' then
      waiting:enter(rid, now, tonumber(rwait), rclass)
      queued = waiting:rank(rid)
    end
    beyond = true
  end
end
local function written()
  for _, i in ipairs(fair) do
    if limits[i].shares then tenants_write(limits[i], now) end
  end
  local out = rooms(limits)
  out[#out + 1] = queued
  return out
end
if beyond or at - now > maxwait then
  keep(limits, now)
  return {0, now, at, remaining, by, unpack(written())}
end
remaining = admit(limits, at, now)
for _, i in ipairs(fair) do
  local L = limits[i]
  if L.shares then
    local s = day(L, at)
    local me = L.tenants[tenant]
    me.spent[s] = (me.spent[s] or 0) + L.need
  end
end
return {1, now, at, remaining, by, unpack(written())}
