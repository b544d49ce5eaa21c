-- bucket.lua: a limit that refills (quota.TokenBucket), decided as the
-- generic cell rate algorithm (GCRA) decides it, in O(1) time and memory
-- whatever the cost.
--
-- Provides: bucket_limit(key, span), bucket_read(B, m), bucket_debt(B, t),
-- bucket_used(B, t), bucket_fit(B, t0, units), bucket_admit(B, at, units),
-- bucket_giveback(B, at, worth, units), bucket_refund(B, at, units),
-- bucket_return(B, at, units, now), bucket_queue_add(B, at, units, now),
-- bucket_queue_write(B, q, now), bucket_extra(B, at, units, now),
-- bucket_full(B), bucket_write(B, now).
-- Needs: binary.lua.
--
-- A bucket of capacity C refilled at R units per period P (µs) is one key,
-- "<prefix>{S}:B:r<period>:tat", holding "#3r:" and five big-endian 8-byte
-- integers:
--
--   u, s, tail, tn, prev
--
-- s is the bucket's debt at instant u, in units times µs of the period
-- (a unit spent is P of debt; R of it is repaid every µs), so that
-- every step is integer arithmetic: the theoretical arrival time of
-- GCRA is u + s/R, exactly, and the bucket holds C - debt/P units at any
-- instant. tail is the newest instant a call was admitted at (holds
-- included), tn the units admitted at tail (UNKNOWN once the calls there
-- were given back and tail went back to prev, the newest instant before
-- it). The key lives until the bucket is full again, and a period more.
--
-- A call of n units fits at t when debt(t) + n*P <= C*P; it is then
-- admitted by adding n*P to the debt at t. For every T0 <= T the units
-- admitted in [T0, T] are then at most C + R*(T - T0)/P: in arrival time
-- (u + s/R), each call admitted from T0 on adds its units' worth to an
-- arrival time no earlier than T0, so after the last of them (admitted by
-- T) it is at least T0 + their units*P/R; and a call is admitted only
-- when the arrival time after it is at most its instant + C*P/R <= T +
-- C*P/R.
--
-- Giving units back (a cancel, a refund) must not make any past instant
-- over the limit: the calls admitted after the one giving back were
-- decided on a debt that counted its units. Replaying every call without
-- them would lower the debt by at most their worth, but not below what
-- the calls after it hold: these were admitted at or before tail, and add
-- up to at most (the debt now) - (the call's instant + its units' worth).
-- So a call of x units admitted at a gives back x*P - R*(tail - a), no
-- less than nothing: all of it when no later call was admitted after a,
-- less the longer the bucket went on after it. An extra charge (the
-- upstream spent more) adds its worth to the debt whatever the level:
-- later calls wait for it.
--
-- A bucket that refunds as its upstream does (its span's last byte 1,
-- quota.Limit.AsUpstream) mirrors an upstream that charges a call's
-- estimate when it arrives and, when the call ends, gives back what it
-- charged beyond the true cost, at once, up to full (Anthropic's output
-- tokens: "estimated based on max_tokens at the beginning of each
-- request and adjusted at the end of the request",
-- https://docs.anthropic.com/en/api/rate-limits). Such an upstream's
-- bucket is a level L refilled at R per µs up to C*P; a call takes n*P
-- from it when it arrives (refused, 429, were L < n*P) and, when it ends,
-- L becomes min(C*P, L + x*P) for the x units given back. The debt here
-- is never below the upstream's (C*P - L), at every instant, so no call
-- admitted here is refused there. A refund at now of x units
-- (bucket_return) keeps that, by what is dated after now:
--
--   - no call dated after now (tail <= now): the upstream gave back x
--     no later than now, to a level no lower: the debt at now falls by
--     x*P, to no less than 0;
--   - calls dated after now at one instant only (prev <= now < tail, tn
--     units there): the upstream takes them at tail, after the refund,
--     so its debt at tail is at least tn*P: the debt at tail falls by
--     x*P, to no less than tn*P;
--   - calls dated after now at several instants h_1 <= ... <= h_k = tail,
--     of H_1, ..., H_k units: the upstream's arrival time after them is
--     at least A = max over j of h_j + (H_j + ... + H_k)*P/R (were it
--     full before h_j), whatever the refund did before them. The debt at
--     tail falls by x*P, to no less than (A - tail)*R. A is kept beside
--     the state (bucket_queue), as an upper bound: a call dated at h adds
--     its worth to every term, and a term of its own, so A becomes
--     max(A, h) + its worth; terms of calls no longer dated after now
--     would only lower what is given back, so they are kept in two
--     generations, the older dropped once now passes its newest instant.
--     When that record is not the state's (written before the state's
--     newest call, by a path that does not keep it), the one-instant rule
--     above is taken when it applies, else nothing is given back.
--
-- A cancel (the span's last byte 2: the call never reached the
-- upstream) is not a refund: the upstream never counted the call. One
-- dated after now (a hold given up) is given back as on any bucket
-- (bucket_giveback): removing its units from the calls dated after now
-- lowers the debt there by their worth less the gaps it may open
-- between tail and it. One dated by now gives nothing back: a refund
-- since may have filled the bucket, which then holds none of its units
-- (the upstream's, without it, would be as full).
--
-- The upstream's bucket lets through more than C + R*(T - T0)/P over
-- some spans (a refund gives back units that later calls then spend
-- again): such a bucket holds the upstream's guarantee, not that bound.

local function bucket_error(key)
  error('FORMAT tollgate: ' .. key .. ' holds a token bucket of a Redis format this tollgate cannot read', 0)
end

-- A bucket named by span, its state in key. C (the capacity) is the
-- caller's to set.
local function bucket_limit(key, span)
  if #span ~= SPAN_LEN then error('ERR tollgate: a token bucket span of ' .. #span .. ' bytes', 0) end
  local p, r, _, _, refunds = sunpack(SPAN, span, 2)
  return {bucket = true, key = key, P = p, R = r, upstream = refunds > 0, cancelling = refunds == 2,
    u = 0, s = 0, tail = 0, tn = 0, prev = 0}
end

-- Read the state m (a string, or false for none: a full bucket).
local function bucket_read(B, m)
  if not m then
    B.u, B.s, B.tail, B.tn, B.prev = 0, 0, 0, 0, 0
    return
  end
  if #m ~= BUCKET_LEN or string.sub(m, 1, 4) ~= '#3r:' then bucket_error(B.key) end
  B.u, B.s, B.tail, B.tn, B.prev = sunpack(BUCKET, m, 5)
  if B.u < 0 or B.s < 0 or B.tail < 0 or B.tn < 0 or B.prev < 0 then bucket_error(B.key) end
end

-- The debt at instant t, in units times µs of the period.
local function bucket_debt(B, t)
  if t < B.u then return B.s + (B.u - t) * B.R end
  if B.s == 0 or (t - B.u) * B.R >= B.s then return 0 end
  return B.s - (t - B.u) * B.R
end

-- The units out of the bucket at t (its capacity less its level), whole.
local function bucket_used(B, t)
  return math.ceil(bucket_debt(B, t) / B.P)
end

-- The earliest instant from t0 at which units fit.
local function bucket_fit(B, t0, units)
  local room = (B.C - units) * B.P
  if bucket_debt(B, t0) <= room then return t0 end
  -- The debt falls by R a µs until it is room: at u + (s - room)/R.
  local t = B.u + math.ceil((B.s - room) / B.R)
  if bucket_debt(B, t) > room then t = t + 1 end -- the division's rounding
  if t < t0 then t = t0 end
  return t
end

-- Count units admitted at instant at.
local function bucket_admit(B, at, units)
  if at >= B.u then
    B.s, B.u = bucket_debt(B, at) + units * B.P, at
  else
    B.s = B.s + units * B.P -- the debt reaches past at: units add to it
  end
  if at > B.tail then
    B.prev, B.tail, B.tn = B.tail, at, units
  elseif at == B.tail and B.tn < UNKNOWN then
    B.tn = B.tn + units
  end
end

-- Give back worth (debt, units times µs) of a call admitted at at, of
-- which units are units (the rest a lease's term: see lease.lua), as far
-- as no past instant goes over (see above). Returns the units no longer
-- counted.
local function bucket_giveback(B, at, worth, units)
  if worth <= 0 or at > B.tail or (B.s == 0 and B.u == 0) then return 0 end
  local lag = (B.tail - at) * B.R
  if lag < worth then
    B.s = B.s - (worth - lag)
    if B.s < 0 then
      -- The arrival time went before u: move u back to it.
      local k = math.ceil(-B.s / B.R)
      B.u, B.s = B.u - k, B.s + k * B.R
    end
  end
  if units > 0 and at == B.tail and B.tn < UNKNOWN then
    B.tn = B.tn - units
    if B.tn <= 0 then B.tail, B.tn = B.prev, UNKNOWN end
  end
  return units
end

-- Give back units of a call admitted at at, as far as no past instant
-- goes over (see above). Returns the units no longer counted.
local function bucket_refund(B, at, units)
  if units <= 0 then return 0 end
  return bucket_giveback(B, at, units * B.P, units)
end

-- The record of a bucket that refunds as its upstream, beside its state:
-- "<state's key>:held", big-endian 8-byte integers: the newest instant of
-- the older generation (t1), its bound (a1), the newer generation's bound
-- (a2), and the state's tail and tn when written, which it must match.
local HELD = '>i8i8i8i8i8'

-- The bound A of the calls dated after now (see above), or nil when the
-- record is not the state's.
local function bucket_queue(B, now)
  local m = redis.call('GET', B.key .. ':held')
  if not m or #m ~= 40 then return nil end
  local t1, a1, a2, tail, tn = sunpack(HELD, m, 1)
  if tail ~= B.tail or tn ~= B.tn then return nil end
  if t1 > now and a1 > a2 then return a1 end
  return a2
end

-- Record a call of units dated at at, after now, on a bucket that
-- refunds as its upstream; called before bucket_admit counts it. Returns
-- the record to write once it is counted (bucket_queue_write), or nil
-- when the calls already dated after now are not known.
local function bucket_queue_add(B, at, units, now)
  local worth = math.ceil(units * B.P / B.R)
  if B.tail <= now then return {0, 0, at + worth} end
  local m = redis.call('GET', B.key .. ':held')
  if not m or #m ~= 40 then return nil end
  local t1, a1, a2, tail, tn = sunpack(HELD, m, 1)
  if tail ~= B.tail or tn ~= B.tn then return nil end
  if t1 <= now then
    -- The older generation is all past: the newer one becomes it.
    return {B.tail, a2 + worth, at + worth}
  end
  return {t1, a1 + worth, math.max(a2, at) + worth}
end

local function bucket_queue_write(B, q, now)
  local ms = math.floor((B.tail - now + B.P) / 1000) + 1000
  redis.call('SET', B.key .. ':held', spack(HELD, q[1], q[2], q[3], B.tail, B.tn), 'PX', string.format('%d', ms))
end

-- Give back units of a call admitted at at, settled at now, as the
-- upstream gives them back (see above). Returns the units no longer
-- counted.
local function bucket_return(B, at, units, now)
  if units <= 0 or (B.s == 0 and B.u == 0) then return 0 end
  local t, least = now, 0
  if B.tail > now then
    local a = bucket_queue(B, now)
    if a then
      t, least = B.tail, math.max(a - B.tail, 0) * B.R
    elseif B.prev <= now and B.tn < UNKNOWN then
      t, least = B.tail, B.tn * B.P
    else
      return 0
    end
  end
  local d = bucket_debt(B, t)
  local left = math.max(d - units * B.P, least)
  if left < d then B.u, B.s = t, left end
  if at == B.tail and B.tn < UNKNOWN then
    B.tn = B.tn - units
    if B.tn <= 0 then B.tail, B.tn = B.prev, UNKNOWN end
  end
  return units
end

-- Count units more for a call admitted at at, decided at now: the
-- upstream spent them. Their worth adds to the debt at u, or at now when
-- the bucket was full by then (the call's own units had been repaid):
-- never less than replaying the call with its true units would count.
local function bucket_extra(B, at, units, now)
  if units <= 0 then return 0 end
  local t = math.max(B.u, now)
  B.s, B.u = bucket_debt(B, t) + units * B.P, t
  if at == B.tail and B.tn < UNKNOWN then B.tn = B.tn + units end
  return units
end

-- The instant the bucket is full again.
local function bucket_full(B)
  if B.s == 0 then return B.u end
  return B.u + math.ceil(B.s / B.R)
end

-- Write the state back with its expiry, or drop it once the bucket is
-- full and no call waits.
local function bucket_write(B, now)
  local full = bucket_full(B)
  local last = math.max(full, B.tail)
  if last <= now then
    redis.call('DEL', B.key)
    return
  end
  local ms = math.floor((last - now + B.P) / 1000) + 1000
  redis.call('SET', B.key, '#3r:' .. spack(BUCKET, B.u, B.s, B.tail, B.tn, B.prev), 'PX', string.format('%d', ms))
end
