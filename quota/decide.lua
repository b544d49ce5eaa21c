-- decide.lua: the general decision, in parts that the reserve and
-- background scripts put together their own ways.
--
-- Provides: windows(n, nread), prepare(limits, read, nread, now, names),
-- place(limits, t0, by), admit(limits, at, now), rooms(limits),
-- keep(limits, now).
-- Needs: log.lua.
--
-- KEYS (every decision script): meta_1, ..., meta_n, then (but for the
-- reserve script, which names them after the metas) the pause of each
-- bucket charged and the scope's, then log_1, ..., log_n (and whatever a
-- script adds after them). ARGV from 4 on: per limit, units, room (its
-- limit less units), span (see limit() in log.lua).

-- The limits of a decision of n windows whose KEYS read first are nread.
local function windows(n, nread)
  local limits = {}
  for i = 1, n do
    local L = limit(KEYS[nread + i], KEYS[i], ARGV[3 * i + 3])
    L.need = ARGV[3 * i + 1] + 0
    L.units = ARGV[3 * i + 2] + L.need
    limits[i] = L
  end
  return limits
end

-- Bring every log up to date where it matters and find where a new entry
-- may go: after the newest entry of each log it joins (first come, first
-- served), and after any pause of its buckets or scope (read after the
-- metas, to nread; named by names, else by KEYS). Returns that instant and
-- what set it (see reserve.lua's reply), or nil and an error reply.
local function prepare(limits, read, nread, now, names)
  local t0, n = now, #limits
  for i, L in ipairs(limits) do
    load(L, read[i])
    local c = cut(L, now)
    if not c then
      return nil, redis.error_reply('ERR tollgate: clock outside the calendar days sent')
    end
    if L.sum > 0 then
      -- Trim when the room is needed, or a window after the oldest entry
      -- left (a day's entries at once); drop leases that have left.
      local needed = L.sum + L.need > L.units
      local stale = L.head ~= 0 and L.head <= c and (L.window == 0 or L.head <= c - L.window)
      local due = false
      for _, x in ipairs(L.leases) do
        if x.e <= c then due = true end
      end
      if needed or stale or due then expire(L, c, needed) end
    end
    if L.sum > L.leased and L.tail > t0 then t0 = L.tail end
  end
  local by, pz = 0, 0
  for i = n + 1, nread do
    local u = pause_end((names or KEYS)[i], read[i])
    if u and u > t0 then t0, by = u, -(i - n) end
    if u and u > now and u > pz then pz = u end
  end
  -- The metas' pause field: the pauses in force (the most of them, for
  -- every window: never less than its own), or 0 once none is, which
  -- lets fast.lua decide again after a resume.
  for _, L in ipairs(limits) do
    if L.pz ~= pz and (pz > 0 or L.pz > now) then L.pz, L.dirty = pz, true end
  end
  return t0, by
end

-- The earliest instant from t0 at which every limit has room: the instant,
-- whether it lies beyond the calendar sent, what set it, and the least
-- room left now.
local function place(limits, t0, by)
  local at, beyond, remaining = t0, false, nil
  for i, L in ipairs(limits) do
    local f = fit(L, t0, L.need)
    if not f then
      beyond, by = true, i
    elseif f > at then
      at, by = f, i
    end
    local room = L.units - L.sum
    if not remaining or room < remaining then remaining = room end
  end
  return at, beyond, by, math.max(remaining, 0)
end

-- Record the call at instant at in every window, and return the least
-- room left.
local function admit(limits, at, now)
  local remaining = nil
  for _, L in ipairs(limits) do
    append(L, at, L.need, now)
    local room = L.units - L.sum
    if not remaining or room < remaining then remaining = room end
  end
  return math.max(remaining, 0)
end

-- The room each limit has left, in order: what the reply tells beyond the
-- least of them.
local function rooms(limits)
  local out = {}
  for i, L in ipairs(limits) do out[i] = math.max(L.units - L.sum, 0) end
  return out
end

-- Write back what changed without admitting anything.
local function keep(limits, now)
  for _, L in ipairs(limits) do
    if L.dirty then save(L, now) end
  end
end
