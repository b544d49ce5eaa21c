-- fairreserve.lua: decide a call on buckets with a pace or shares, in one
-- atomic step, as reserve.lua decides any other: now, or as a hold at the
-- earliest instant every limit, pace line and share allows, after every
-- hold already waiting. Its reply is reserve.lua's list.
--
-- Needs: fairread.lua and readpauses.lua (n, read, nread, names), now.lua
-- (now), log.lua, decide.lua, fair.lua.
--
-- KEYS: meta_1, ..., meta_n, log_1, ..., log_n, tenants_1, ..., tenants_n
-- ARGV: clock, maxwait, charges (reserve.lua's), then per limit: units,
--       room, span (decide.lua's); then per limit: the burst units of its
--       pace ('' for none), and which shares it keeps (0 for none, else
--       k for the k-th below); then the tenant; then how many shares,
--       and per shares: Idle (µs), Lendable (0..1), how many tenants are
--       listed, then each one's name and weight.

local maxwait = tonumber(ARGV[2])
local limits = windows(n, n)
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
-- A request makes its tenant active, admitted or not.
for _, i in ipairs(fair) do
  local L = limits[i]
  if L.shares then
    local me = L.tenants[tenant] or {seen = now, spent = {}}
    me.seen, me.dirty = math.max(me.seen, now), true
    L.tenants[tenant] = me
  end
end
if beyond or at - now > maxwait then
  keep(limits, now)
  for _, i in ipairs(fair) do
    if limits[i].shares then tenants_write(limits[i], now) end
  end
  return {0, now, at, remaining, by, unpack(rooms(limits))}
end
remaining = admit(limits, at, now)
for _, i in ipairs(fair) do
  local L = limits[i]
  if L.shares then
    local s = day(L, at)
    local me = L.tenants[tenant]
    me.spent[s] = (me.spent[s] or 0) + L.need
    tenants_write(L, now)
  end
end
return {1, now, at, remaining, by, unpack(rooms(limits))}
