-- fairundo.lua: cancel.lua's or settle.lua's body (wrapped as body())
-- for a reservation on buckets with shares, and the change it makes
-- charged to the tenant that spent, in the window its instant lies in.
--
-- Needs: clock.lua, log.lua, fair.lua; body(), the wrapped script.
--
-- KEYS: the wrapped script's, then the tenants key of each limit with
--       shares
-- ARGV: the wrapped script's, then per tenants key: its limit's span and
--       the change in units (negative to give back); then the tenant;
--       then how many tenants keys. They are taken off ARGV and KEYS
--       before the body runs, which so reads its own.

local k = tonumber(table.remove(ARGV))
local tenant = table.remove(ARGV)
local undo = {}
for j = k, 1, -1 do
  local delta = tonumber(table.remove(ARGV))
  undo[j] = {span = table.remove(ARGV), delta = delta}
end
for j = k, 1, -1 do undo[j].tkey = table.remove(KEYS) end
local result = body()
local at = tonumber(ARGV[2])
for _, u in ipairs(undo) do
  local L = limit('', '', u.span)
  L.tkey = u.tkey
  local s = day(L, at)
  if s and u.delta ~= 0 then tenant_add(L, tenant, s, u.delta) end
end
return result
