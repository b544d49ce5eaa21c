-- fair.lua: what a decision on a bucket with a pace or shares needs
-- beyond decide.lua: the pace line, the tenants' spending, and the
-- earliest instant both allow (Charge.Pace, Charge.Shares).
--
-- Provides: muldiv(), counted_in(), tenants_read(), tenants_write(),
-- fair_fit().
-- Needs: log.lua.
--
-- Both apply to calendar days and fixed windows whose end is known (a
-- limit whose span is bounds, L.window == 0); sliding windows and token
-- buckets are decided as without them.
--
-- Pace: with B the burst units (Burst of the limit L.units, rounded down)
-- and P = L.units - B, what a window [s, e) may hold at instant t is
-- A(t) = B + floor(P * (t - s) / (e - s)): every entry dated t finds the
-- window's units up to t, itself included, no more than A(t). The line is
-- cumulative: what was not spent early may be spent later.
--
-- Shares: the tenants of a limit and what each spent are kept in a hash
-- beside its meta (its key ends ":tenants"): field the tenant, value
-- "<seen>" then ";<start>:<units>" per window (its start in µs) the
-- tenant has entries in, seen being the instant of its latest request.
-- A tenant is active when seen lies within Idle of now (the one deciding
-- always is). W is the sum of the weights of the tenants listed and of
-- those not listed (weighing 1) that are active; tenant j's share at t is
-- A(t) * w_j / W (A = L.units without a pace), its unspent part u_j the
-- share less what it spent in the window (never below 0), and what it
-- keeps from the others u_j while active, (1 - Lendable) * u_j while
-- idle. A call of tenant i for need units fits at t when
--
--   counted + sum over j ~= i of kept_j + max(need, u_i) <= A(t)
--
-- which keeps counted + sum of kept <= A(t) after it: a tenant below its
-- share always finds its unspent part free, whatever the others did, but
-- for what it lent while idle; beyond its share it spends only what no
-- other tenant keeps.

-- a * b = q * c + r exactly, for integers a, b >= 0 and c > 0 below 2^51
-- with q below 2^53 (doubles: a * b may be far beyond 2^53). Returns q, r.
local function muldiv(a, b, c)
  local qa, ra = math.floor(a / c), a % c
  local q, r = 0, 0
  local bits, x = {}, b
  while x > 0 do
    bits[#bits + 1] = x % 2
    x = math.floor(x / 2)
  end
  -- ra * b / c, bit by bit of b: r stays below c, so below 2^51.
  for k = #bits, 1, -1 do
    q, r = q * 2, r * 2
    if r >= c then q, r = q + 1, r - c end
    if bits[k] == 1 then
      r = r + ra
      if r >= c then q, r = q + 1, r - c end
    end
  end
  return qa * b + q, r
end

-- The units counted in the window that starts at s: what fit() in
-- log.lua counts for a calendar day.
local function counted_in(L, s)
  local counted = L.sum
  if L.head ~= 0 and L.head < s then
    scan(L, function(ts, u)
      if ts >= s then return true end
      counted = counted - u
    end)
  end
  for _, x in ipairs(L.leases) do
    if x.e < s then counted = counted - x.u end
  end
  return counted
end

-- What the window [s, e) of L may hold at t (A(t) above).
local function allowance(L, s, e, t)
  if not L.burst then return L.units end
  local B = L.burst
  local P = L.units - B
  if t < s then return B end
  local q = muldiv(P, t - s, e - s)
  return B + q
end

-- Read the tenants of L (L.tkey): L.tenants[name] = {seen, spent =
-- {[start] = units}}.
local function tenants_read(L)
  L.tenants = {}
  local all = redis.call('HGETALL', L.tkey)
  for k = 1, #all, 2 do
    local v = all[k + 1]
    local seen, rest = string.match(v, '^(%d+)(.*)$')
    if not seen then format_error(L.tkey, 'a tenant') end
    local x = {seen = tonumber(seen), spent = {}}
    if string.gsub(rest, ';%d+:%d+', '') ~= '' then format_error(L.tkey, 'a tenant') end
    for s, u in string.gmatch(rest, ';(%d+):(%d+)') do x.spent[tonumber(s)] = tonumber(u) end
    L.tenants[all[k]] = x
  end
end

-- Write tenant name of L back, keeping only the windows that have not
-- ended by now, and give the hash an expiry past them and past Idle.
local function tenants_write(L, name, now)
  local x = L.tenants[name]
  local s0 = day(L, now) or now
  local parts, last = {string.format('%d', x.seen)}, now
  local starts = {}
  for s in pairs(x.spent) do starts[#starts + 1] = s end
  table.sort(starts)
  for _, s in ipairs(starts) do
    if s >= s0 and x.spent[s] > 0 then
      parts[#parts + 1] = string.format(';%d:%d', s, x.spent[s])
      local _, e = day(L, s)
      if e and e > last then last = e end
    end
  end
  redis.call('HSET', L.tkey, name, table.concat(parts))
  local ms = math.floor((math.max(last, x.seen + L.shares.idle) - now) / 1000) + 1000
  if redis.call('PTTL', L.tkey) < ms then redis.call('PEXPIRE', L.tkey, ms) end
end

-- Whether tenant i's call of need units fits L's window [s, e) at t, with
-- counted units in it.
local function fair_ok(L, s, e, t, counted, need, tenant, now)
  local A = allowance(L, s, e, t)
  if counted + need > A then return false end
  local sh = L.shares
  if not sh then return true end
  local W, active = sh.listed, {}
  for name, x in pairs(L.tenants) do
    active[name] = name == tenant or x.seen > now - sh.idle
    if not sh.w[name] and active[name] then W = W + 1 end
  end
  if not sh.w[tenant] and not L.tenants[tenant] then
    W = W + 1
    active[tenant] = true
  end
  local kept, mine = 0, 0
  local function unspent(name, w)
    local x = L.tenants[name]
    local spent = x and x.spent[s] or 0
    return math.max(A * w / W - spent, 0)
  end
  for name, w in pairs(sh.w) do
    if name ~= tenant then
      local u = unspent(name, w)
      if active[name] then kept = kept + u else kept = kept + (1 - sh.lend) * u end
    end
  end
  for name in pairs(L.tenants) do
    if name ~= tenant and not sh.w[name] and active[name] then kept = kept + unspent(name, 1) end
  end
  mine = unspent(tenant, sh.w[tenant] or 1)
  return counted + kept + math.max(need, mine) <= A
end

-- The earliest instant from t at which L's pace and shares let tenant's
-- call of L.need units in (and its limit, as fit() finds it), or nil
-- beyond the calendar sent. All entries are dated t or earlier.
local function fair_fit(L, t, tenant, now)
  if L.window > 0 or not (L.burst or L.shares) then return t end
  for _ = 1, #L.bounds do
    local s, e = day(L, t)
    if not s then return nil end
    local counted = counted_in(L, s)
    local need = L.need
    if fair_ok(L, s, e, e - 1, counted, need, tenant, now) then
      if fair_ok(L, s, e, t, counted, need, tenant, now) then return t end
      -- The first instant it fits: fair_ok is monotonic in t (the
      -- allowance grows at least as fast as what the others keep).
      local lo, hi = t, e - 1
      if not L.shares then
        -- Closed form: B + floor(P * d / len) >= counted + need.
        local a = counted + need - L.burst
        local q, r = muldiv(a, e - s, L.units - L.burst)
        if r > 0 then q = q + 1 end
        local d = s + q
        if d > lo then lo = d end
        return lo
      end
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if fair_ok(L, s, e, mid, counted, need, tenant, now) then hi = mid else lo = mid + 1 end
      end
      return lo
    end
    t = e
  end
  return nil
end

-- Add delta units (negative to give back) to what tenant name spent in
-- the window of L starting at s, no lower than 0: a cancellation or a
-- settlement, charged to the tenant that spent. The hash keeps its TTL.
local function tenant_add(L, name, s, delta)
  local v = redis.call('HGET', L.tkey, name)
  if not v then return end
  local seen, rest = string.match(v, '^(%d+)(.*)$')
  if not seen or string.gsub(rest, ';%d+:%d+', '') ~= '' then format_error(L.tkey, 'a tenant') end
  local parts, found = {seen}, false
  for st, u in string.gmatch(rest, ';(%d+):(%d+)') do
    u = tonumber(u)
    if tonumber(st) == s then
      u, found = math.max(u + delta, 0), true
    end
    if u > 0 then parts[#parts + 1] = ';' .. st .. ':' .. string.format('%d', u) end
  end
  if not found and delta > 0 then parts[#parts + 1] = string.format(';%d:%d', s, delta) end
  redis.call('HSET', L.tkey, name, table.concat(parts))
end
