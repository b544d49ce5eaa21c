-- fair.lua: what a decision on a bucket with a pace or shares needs
-- beyond decide.lua: the pace line, the tenants' spending, and the
-- earliest instant both allow (Demand.Pace, Demand.Shares).
--
-- Provides: muldiv(), counted_in(), tenants_parse(), tenants_format(),
-- tenants_read(), tenants_write(), tenant_add(), fair_fit(), below().
-- Needs: log.lua.
--
-- Both apply to calendar days and fixed windows whose end is known (a
-- limit whose span is bounds: L.window == 0, and not L.bucket); sliding
-- windows and token buckets are decided as without them.
--
-- Pace: with B the burst units (Burst of the limit L.units, rounded down)
-- and P = L.units - B, what a window [s, e) may hold at instant t is
-- A(t) = B + floor(P * (t - s) / (e - s)): every entry dated t finds the
-- window's units up to t, itself included, no more than A(t). The line is
-- cumulative: what was not spent early may be spent later.
--
-- Shares: the tenants of a limit and what each spent are kept in a key
-- beside its meta (its name ends ":tenants"; see tenants_parse()): per
-- tenant, the instant of its latest request (seen) and its units per
-- window (by its start in µs) it has entries in. A tenant idle with
-- nothing in a window that has not ended is dropped, so the key holds
-- the tenants of the window's latest Idle.
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

-- The tenants a tenants key holds (v: its value, or false):
-- {[name] = {seen, spent = {[start] = units}}}. The value is "T1", then
-- per tenant "\n<length of name>:<name><seen>" and ";<start>:<units>"
-- per window it spent in; names are any bytes.
local function tenants_parse(key, v)
  local out = {}
  if not v then return out end
  if string.sub(v, 1, 2) ~= 'T1' then format_error(key, 'tenants') end
  local pos = 3
  while pos <= #v do
    local len, at = string.match(v, '^\n(%d+):()', pos)
    if not len then format_error(key, 'tenants') end
    local name = string.sub(v, at, at + tonumber(len) - 1)
    if #name ~= tonumber(len) then format_error(key, 'tenants') end
    local seen, rest, nxt = string.match(v, '^(%d+)([;:%d]*)()', at + #name)
    if not seen then format_error(key, 'tenants') end
    -- x.raw: the tenant as written, kept as it is unless it changes.
    local x, read = {seen = tonumber(seen), spent = {}, raw = string.sub(v, pos, nxt - 1)}, 0
    for st, u in string.gmatch(rest, ';(%d+):(%d+)') do
      read = read + #st + #u + 2
      st = tonumber(st)
      x.spent[st] = tonumber(u)
      if not x.first or st < x.first then x.first = st end
      if not x.top or st > x.top then x.top = st end
    end
    if read ~= #rest then format_error(key, 'tenants') end
    out[name] = x
    pos = nxt
  end
  return out
end

-- The value of a tenants key holding tenants, but for the windows that
-- ended before s0 and the tenants left with none that were not seen
-- after quiet; and the end of the latest window kept (or 0).
local function tenants_format(L, tenants, s0, quiet)
  local parts, last = {'T1'}, 0
  for name, x in pairs(tenants) do
    if x.raw and not x.dirty and (not x.first or x.first >= s0) and (x.first or x.seen > quiet) then
      -- Unchanged, and nothing of it to drop: as it was read.
      parts[#parts + 1] = x.raw
      if x.top then
        local _, e = day(L, x.top)
        if e and e > last then last = e end
      end
    else
      x.dirty = nil
      local starts, kept = {}, {}
      for st, u in pairs(x.spent) do
        if st >= s0 and u > 0 then starts[#starts + 1] = st end
      end
      table.sort(starts)
      for _, st in ipairs(starts) do
        kept[#kept + 1] = string.format(';%d:%d', st, x.spent[st])
        local _, e = day(L, st)
        if e and e > last then last = e end
      end
      if #kept > 0 or x.seen > quiet then
        parts[#parts + 1] = string.format('\n%d:', #name) .. name .. string.format('%d', x.seen) .. table.concat(kept)
      end
    end
  end
  return table.concat(parts), last
end

-- Read the tenants of L (L.tkey) into L.tenants.
local function tenants_read(L)
  L.tenants = tenants_parse(L.tkey, redis.call('GET', L.tkey))
end

-- Write the tenants of L back, without the windows that have ended by
-- now and the tenants idle with nothing left in a window, with an expiry
-- past the windows kept and past Idle.
local function tenants_write(L, now)
  local s0 = day(L, now) or now
  local v, last = tenants_format(L, L.tenants, s0, now - L.shares.idle)
  local ms = math.floor((math.max(last, now + L.shares.idle) - now) / 1000) + 1000
  redis.call('SET', L.tkey, v, 'PX', string.format('%d', ms))
end

-- The others of tenant in L's window starting at s, as fair_ok() reads
-- them: parallel arrays of their weights, what they spent and the part
-- of their unspent share they keep (1 active, 1 - Lendable idle); with
-- W, the tenant's weight and what it spent. Worked out once per window a
-- decision looks at (L.others[s]).
local function others(L, s, tenant, now)
  L.others = L.others or {}
  local o = L.others[s]
  if o then return o end
  local sh = L.shares
  local quiet = now - sh.idle
  o = {w = {}, spent = {}, keep = {}, W = sh.listed}
  local k = 0
  for name, w in pairs(sh.w) do
    if name ~= tenant then
      local x = L.tenants[name]
      k = k + 1
      o.w[k], o.spent[k] = w, x and x.spent[s] or 0
      o.keep[k] = (x and x.seen > quiet) and 1 or (1 - sh.lend)
    end
  end
  for name, x in pairs(L.tenants) do
    if name ~= tenant and not sh.w[name] and x.seen > quiet then
      k = k + 1
      o.w[k], o.spent[k], o.keep[k] = 1, x.spent[s] or 0, 1
      o.W = o.W + 1
    end
  end
  o.mine = sh.w[tenant] or 1
  if not sh.w[tenant] then o.W = o.W + 1 end
  local me = L.tenants[tenant]
  o.spentMine = me and me.spent[s] or 0
  L.others[s] = o
  return o
end

-- What the others of tenant keep of L's window starting at s when it
-- may hold A, and the tenant's own unspent share (below 0 when beyond).
local function kept_at(L, s, A, tenant, now)
  local o = others(L, s, tenant, now)
  local per, kept = A / o.W, 0
  for k = 1, #o.w do
    local u = per * o.w[k] - o.spent[k]
    if u > 0 then kept = kept + o.keep[k] * u end
  end
  return kept, per * o.mine - o.spentMine
end

-- Whether tenant's call of need units fits L's window [s, e) at t, with
-- counted units in it. Sums of shares are doubles, each within an ulp of
-- its true value: the share rule tolerates A/2^40 (a billionth of a unit
-- on a limit of 10,000), while the limit itself and the pace line are
-- exact integers.
local function fair_ok(L, s, e, t, counted, need, tenant, now)
  local A = allowance(L, s, e, t)
  if counted + need > A then return false end
  if not L.shares then return true end
  local kept, mine = kept_at(L, s, A, tenant, now)
  if mine < need then mine = need end
  return counted + kept + mine <= A + A / 1099511627776
end

-- The earliest instant from t at which L's pace and shares let tenant's
-- call of L.need units in (and its limit, as fit() finds it), or nil
-- beyond the calendar sent. All entries are dated t or earlier.
local function fair_fit(L, t, tenant, now)
  if L.window > 0 or L.bucket or not (L.burst or L.shares) then return t end
  for _ = 1, #L.bounds do
    local s, e = day(L, t)
    if not s then return nil end
    local counted = counted_in(L, s)
    local need = L.need
    if fair_ok(L, s, e, t, counted, need, tenant, now) then return t end
    if fair_ok(L, s, e, e - 1, counted, need, tenant, now) then
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

-- Whether tenant has spent less than its share at now of L's window
-- holding now: it then goes before the tenants at or above theirs (see
-- fairroom.lua). A window beyond the calendar sent counts as below (the
-- decision refuses it anyway).
local function below(L, tenant, now)
  local s, e = day(L, now)
  if not s then return true end
  local o = others(L, s, tenant, now)
  return o.spentMine < allowance(L, s, e, now) * o.mine / o.W
end

-- Add delta units (negative to give back) to what tenant name spent in
-- the window of L starting at s, no lower than 0: a cancellation or a
-- settlement, charged to the tenant that spent. The key keeps its TTL.
local function tenant_add(L, name, s, delta)
  local v = redis.call('GET', L.tkey)
  local tenants = tenants_parse(L.tkey, v)
  local x = tenants[name]
  if not x then return end
  x.spent[s], x.dirty = math.max((x.spent[s] or 0) + delta, 0), true
  local out = tenants_format(L, tenants, 0, -1)
  redis.call('SET', L.tkey, out, 'KEEPTTL')
end
