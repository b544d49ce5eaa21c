-- announce.lua: hold a bucket's windows to what its upstream announced:
-- units spent by others (a script, a dashboard, another client of the same
-- credential) that the windows do not count.
--
-- Needs: clock.lua, log.lua.
--
-- An announcement says how many units the upstream counts as used until an
-- instant it resets. When that is more than a window counts, the
-- difference is recorded as spent, as a record the meta keeps beside its
-- leases (id "~a"): it counts in the sum at once and leaves the window at
-- the announced reset, no later (a sliding window counts it as an entry
-- dated a window before the reset would be; a fixed window, until the
-- window that holds the reset ends). It is a level, not an increment:
-- processes that read the same announcement record it once, and an older
-- announcement (an earlier reset) never replaces a newer one. Resets less
-- than a tolerance apart are one reset read at different instants (an
-- upstream that announces it as a delay, in whole seconds or rounded):
-- its first reading is kept, and the most spent elsewhere. When the
-- upstream counts fewer units, nothing is given back.
--
-- KEYS: meta_1, log_1, ..., meta_n, log_n (the windows of
--       one bucket), then the announced state: "<reset>:<limit>:<window>"
--       of the newest announcement, for processes that learn limits,
--       windows and resets from it
-- ARGV: clock, used (units, by the upstream's count), reset (µs), limit
--       (units announced, 0 when not), window (µs announced, 0 when not),
--       tolerance (µs), as_of (µs: the entries dated after it are calls
--       the upstream had not counted yet; 0: none), then per window: span
--       (see limit() in log.lua)
-- Reply: {recorded (units now counted as spent elsewhere, the largest over
--        the windows), changed (1 when a record was written), stale (1 when
--        the announcement was older than the one recorded), then the state
--        as recorded: reset, limit, window}

local now = clock(ARGV[1])
local used, reset, tol, as_of = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6]), tonumber(ARGV[7])
local n = (#ARGV - 7)
local state = KEYS[2 * n + 1]

-- The newest announcement wins: an older one (an earlier reset) changes
-- nothing, here or in the windows. Another reading of the same reset
-- keeps the first: every process then ends the window at one instant.
local last = redis.call('GET', state)
local limit_, window_ = tonumber(ARGV[4]), tonumber(ARGV[5])
if last then
  local r, lu, lw = string.match(last, '^(%d+):(%d+):(%d+)$')
  if not r then format_error(state, 'an announcement') end
  r, lu, lw = tonumber(r), tonumber(lu), tonumber(lw)
  if r - reset >= tol then return {0, 0, 1, r, lu, lw} end
  if reset - r < tol then reset = r end
  -- What this one does not say, the newest that did still holds.
  if limit_ == 0 then limit_ = lu end
  if window_ == 0 then window_ = lw end
end
if reset > now then
  redis.call('SET', state, string.format('%d:%d:%d', reset, limit_, window_),
    'PX', math.floor((reset - now) / 1000) + 60000)
end

-- The units of L's entries dated after t: calls admitted after the
-- upstream took its count, which it could not hold (an entry holding
-- calls from both sides of t counts as after it: the count of others'
-- spending is then too high, never too low). The log is sorted by time,
-- so they are read from its tail, after the open slice and the closed
-- slices the meta holds.
local function after(L, t)
  if t == 0 or L.head == 0 or L.tail <= t then return 0 end
  local units, to = L.open.u, -1
  for k = #L.buf, 1, -1 do
    if L.buf[k].t <= t then return units end
    units = units + L.buf[k].u
  end
  while true do
    local batch = redis.call('LRANGE', L.log, to - BATCH + 1, to)
    for i = #batch, 1, -1 do
      local ts, u = entry(L.log, batch[i])
      if ts <= t then return units end
      units = units + u
    end
    if #batch < BATCH then return units end
    to = to - BATCH
  end
end

local recorded, changed = 0, 0
for i = 1, n do
  local L = limit(KEYS[2 * i], KEYS[2 * i - 1], ARGV[7 + i])
  load(L, redis.call('GET', L.meta))
  local c = cut(L, now)
  if c then
    if L.sum > 0 then expire(L, c, true) end
    -- The record's end: a sliding window drops it a window after it, a
    -- fixed one once its window is over.
    local e = reset - L.window
    if L.window == 0 then e = reset - 1 end
    local j, rec = nil, nil
    for k, x in ipairs(L.leases) do
      if x.id == '~a' then j, rec = k, x end
    end
    local own = L.sum - (rec and rec.u or 0) - after(L, as_of)
    local outside = used - own
    local keep = rec and math.abs(rec.e - e) < tol and rec.u >= outside
    if not keep and (outside > 0 or rec) and e > c then
      if rec then
        L.sum, L.leased = L.sum - rec.u, L.leased - rec.u
        table.remove(L.leases, j)
      end
      if outside > 0 then
        L.leases[#L.leases + 1] = {id = '~a', e = e, u = outside}
        L.sum, L.leased = L.sum + outside, L.leased + outside
      end
      L.dirty, changed = true, 1
    end
    if L.dirty then save(L, now) end
    local counted = 0
    for _, x in ipairs(L.leases) do
      if x.id == '~a' then counted = x.u end
    end
    if counted > recorded then recorded = counted end
  end
end
return {recorded, changed, 0, reset, limit_, window_}
