-- settlefast.lua: settle.lua's common case written out, taken before
-- log.lua's functions are made: every window settled a token bucket's
-- (an LLM call's input and output tokens, say). Each bucket's state is
-- read and written once, and no closure is made.
--
-- Provides: nothing; it returns settle.lua's reply, or falls through to
-- settle.lua when a window is not a bucket's.
-- Needs: clock.lua, binary.lua. KEYS and ARGV are settle.lua's.
--
-- It decides as settle.lua does through bucketlog.lua (find(), change(),
-- save()): bucket.lua's bucket_read, bucket_return (a bucket that refunds
-- as its upstream), bucket_refund, bucket_extra and bucket_write,
-- written out, in the same order, with the same errors.

do
  local n = (#ARGV - 2) / 2
  local all = n >= 1
  for i = 1, n do
    local span = ARGV[2 + 2 * i]
    if string.byte(span, 1) ~= 114 or #span ~= SPAN_LEN then -- 'r'
      all = false
      break
    end
  end
  if all then
    local now = clock(ARGV[1])
    local at = ARGV[2] + 0
    local settled = 0
    for i = 1, n do
      local key = KEYS[i]
      local P, R, _, _, refunds = sunpack(SPAN, ARGV[2 + 2 * i], 2)
      local m = redis.call('GET', key)
      local u, s, tail, tn, prev = 0, 0, 0, 0, 0
      if m then
        local tag = ''
        if #m == BUCKET_LEN then tag, u, s, tail, tn, prev = sunpack(TAGGED, m, 1) end
        if tag ~= '#3r:' or u < 0 or s < 0 or tail < 0 or tn < 0 or prev < 0 then error('FORMAT tollgate: ' .. key .. ' holds a token bucket of a Redis format this tollgate cannot read', 0) end
      end
      local delta = ARGV[1 + 2 * i] + 0
      -- A full bucket holds no call's units; one that refunds as its
      -- upstream counts an extra charge all the same (bucketlog.lua's
      -- find()).
      if u ~= 0 or s ~= 0 or refunds > 0 then
        if delta < 0 and refunds > 0 and at <= now then
          -- A refund as the upstream gives it back (bucket_return).
          local units, t, least = -delta, now, 0
          if tail > now then
            -- The calls dated after now (bucket_queue).
            local a
            local q = redis.call('GET', key .. ':held')
            if q and #q == 40 then
              local t1, a1, a2, qtail, qtn = sunpack('>i8i8i8i8i8', q, 1)
              if qtail == tail and qtn == tn then
                a = a2
                if t1 > now and a1 > a2 then a = a1 end
              end
            end
            if a then
              t, least = tail, math.max(a - tail, 0) * R
            elseif prev <= now and tn < UNKNOWN then
              t, least = tail, tn * P
            else
              t = nil
            end
          end
          if t then
            local d = 0
            if t < u then
              d = s + (u - t) * R
            elseif s > 0 and (t - u) * R < s then
              d = s - (t - u) * R
            end
            local left = math.max(d - units * P, least)
            if left < d then u, s = t, left end
            if at == tail and tn < UNKNOWN then
              tn = tn - units
              if tn <= 0 then tail, tn = prev, UNKNOWN end
            end
          end
        elseif delta < 0 and at <= tail then
          -- A refund: what no later call may have counted on (bucket_giveback).
          local units = -delta
          local worth, lag = units * P, (tail - at) * R
          if lag < worth then
            s = s - (worth - lag)
            if s < 0 then
              local k = math.ceil(-s / R)
              u, s = u - k, s + k * R
            end
          end
          if at == tail and tn < UNKNOWN then
            tn = tn - units
            if tn <= 0 then tail, tn = prev, UNKNOWN end
          end
        elseif delta > 0 then
          -- An extra charge, from the bucket's level at the script's
          -- instant as bucketlog.lua reads it (bucket_extra).
          local t = math.max(u, clock(ARGV[1]))
          local d = 0
          if s > 0 and (t - u) * R < s then d = s - (t - u) * R end
          s, u = d + delta * P, t
          if at == tail and tn < UNKNOWN then tn = tn + delta end
        end
        local last = u
        if s ~= 0 then last = u + math.ceil(s / R) end
        if tail > last then last = tail end
        if last <= now then
          redis.call('DEL', key)
        else
          redis.call('SET', key, spack(TAGGED, '#3r:', u, s, tail, tn, prev), 'PX', string.format('%d', math.floor((last - now + P) / 1000) + 1000))
        end
        settled = settled + 1
      end
    end
    return settled
  end
end
