-- fairlease.lua: lease.lua's body (wrapped as body()) for a lease on a
-- bucket with a pace or shares: taken from the tenant's part, and charged
-- to it. A lease is granted only what its tenant's call of that many units
-- would be admitted now (fair.lua's rule, its units all counted from now),
-- and its units count as the tenant's spending in the window of its grant;
-- ending it gives back to the tenant what it did not spend.
--
-- Needs: clock.lua, log.lua, fair.lua; body(), the wrapped script.
--
-- KEYS: lease.lua's, then the tenants key per window
-- ARGV: lease.lua's, then the tenant, Idle (µs), Lendable, how many
--       tenants are listed and each one's name and weight, then per
--       window the burst units of its pace ('' for none) and whether it
--       keeps shares (1 or 0), then how many of these arguments there are.
--       They are taken off ARGV and KEYS before the body runs.

local m = tonumber(table.remove(ARGV))
local fa = {}
for j = m, 1, -1 do fa[j] = table.remove(ARGV) end
local nw = (#ARGV - 8) / 2
local tkeys = {}
for j = nw, 1, -1 do tkeys[j] = table.remove(KEYS) end
local tenant = fa[1]
local spec = {idle = tonumber(fa[2]), lend = tonumber(fa[3]), w = {}, listed = 0}
local p = 5
for _ = 1, tonumber(fa[4]) do
  local w = tonumber(fa[p + 1])
  spec.w[fa[p]] = w
  spec.listed = spec.listed + w
  p = p + 2
end

local now = clock(ARGV[1])
ARGV[1] = string.format('%d', now) -- the body decides at the same instant
local nread = #KEYS - nw
local fair = {}
for i = 1, nw do
  local L = limit(KEYS[nread + i], KEYS[i], ARGV[2 * i + 8])
  L.units = tonumber(ARGV[2 * i + 7])
  if fa[p] ~= '' then L.burst = tonumber(fa[p]) end
  if fa[p + 1] == '1' then L.shares, L.tkey = spec, tkeys[i] end
  p = p + 2
  if L.window == 0 and not L.bucket and (L.burst or L.shares) then
    fair[#fair + 1], L.index = L, i
  end
end

if ARGV[2] == 'end' then
  local result = body()
  -- What was not spent goes back to the tenant, in the window of the grant.
  local unspent = tonumber(ARGV[8]) - math.max(0, math.min(tonumber(ARGV[4]), tonumber(ARGV[8])))
  for _, L in ipairs(fair) do
    local s = day(L, tonumber(ARGV[6]))
    if L.shares and s and unspent > 0 then tenant_add(L, tenant, s, -unspent) end
  end
  return result
end

-- The most the tenant may take now: need <= A - counted - kept, and its
-- own unspent share no more than that either (fair_ok()).
local most = tonumber(ARGV[4])
for _, L in ipairs(fair) do
  load(L, redis.call('GET', KEYS[L.index]))
  local s, e = day(L, now)
  if s then
    local counted = counted_in(L, s)
    local A = allowance(L, s, e, now)
    local bound = A - counted
    if L.shares then
      tenants_read(L)
      local kept, mine = kept_at(L, s, A, tenant, now)
      bound = math.floor(A - counted - kept + A / 1099511627776)
      if mine > bound + A / 1099511627776 then bound = 0 end
    end
    if bound < most then most = math.max(bound, 0) end
  end
end
ARGV[4] = string.format('%d', most)
local result = body()
if result.err then return result end
local granted = result[1]
for _, L in ipairs(fair) do
  if L.shares then
    local me = L.tenants[tenant] or {seen = now, spent = {}}
    me.seen, me.dirty = math.max(me.seen, now), true
    local s = day(L, now)
    if granted > 0 and s then me.spent[s] = (me.spent[s] or 0) + granted end
    L.tenants[tenant] = me
    tenants_write(L, now)
  end
end
if granted <= 0 then
  -- When one unit of the tenant's would fit.
  for _, L in ipairs(fair) do
    L.need = 1
    local f = fair_fit(L, now, tenant, now)
    if f and f > result[3] then result[3] = f end
  end
end
return result
