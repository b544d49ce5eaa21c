-- settlewindows.lua: settle.lua's common case on windows written out,
-- taken before log.lua's functions are made: every settled window counts
-- the call in its open slice, one of its closed slices (still in the
-- meta), or the log's last entry, as a call settled soon after its
-- decision does, and holds no lease. Each window's meta is read once and
-- written once, its fields by one struct.unpack and one struct.pack, the
-- log's end read by index, and no Lua function is made, nor a table but
-- for a push of several closed slices or a new expiry's pause read.
--
-- Provides: nothing; it returns settle.lua's reply, or falls through to
-- settle.lua, having written nothing, when a window is not in this case.
-- Needs: clock.lua, binary.lua. KEYS and ARGV are settle.lua's.
--
-- It decides as settle.lua does through log.lua (load(), find(),
-- change(), save()), written out in the same order, and writes the same
-- bytes: find() pushes the closed slices to the log (here their bytes,
-- the settled one's changed), change() changes the units of the entry
-- that counts the call and the sum, and save() computes the meta's until
-- again, and pushes the keys' expiry back when it must (the log new, or
-- the tail's window reaching past it). Anything else falls through: a
-- meta missing, of another format or with leases; the call's units in an
-- older entry, or in none; the open slice emptied (the log's newest entry
-- becomes the tail); nothing left counted. A value log.lua would refuse
-- falls through too, and is refused there.
--
-- With several windows it checks every one first (a second read of each
-- meta), so that it writes either all of them or nothing.

do
  local n = (#ARGV - 2) / 2
  local lean = n >= 1
  for i = 1, n do
    if string.byte(ARGV[2 + 2 * i], 1) == 114 then lean = false end -- 'r': a bucket's span
  end
  local now, at
  local sub, floor = string.sub, math.floor
  -- One pass with one window; with several, a pass that only checks.
  for pass = n == 1 and 2 or 1, 2 do
    if not lean then break end
    local settled = 0
    for i = 1, n do
      repeat -- a block to leave (break) at the first reason to fall through
        local key, log, span = KEYS[i], KEYS[n + i], ARGV[2 + 2 * i]
        local window = tonumber(span) -- nil: a calendar's midnights
        if window == 0 then lean = false break end
        local m = redis.call('GET', key)
        if not m or #m < HEAD or sub(m, 1, 3) ~= '#3:' then lean = false break end
        local ot, ou, sum, en, nb, til, pz, head, exp, origin, slice = sunpack(META, m, 4)
        if ot < 0 or ou < 0 or sum < 0 or en < 0 or til < 0 or pz < 0 or head < 0 or exp < 0 or
            origin < 0 or slice < 0 or nb >= BUFFER or #m ~= HEAD + 16 * nb or
            sum <= 0 or slice <= 0 then
          lean = false
          break
        end
        local bad, tail = false, ot -- the newest entry's instant (load())
        for k = 1, nb do
          local t, u = sunpack(ENTRY, m, HEAD + 16 * k - 15)
          if t < 0 or u < 0 then bad = true end
          if ou == 0 then tail = t end
        end
        if bad then lean = false break end
        -- The log's last entry (lt, lu; lt -1: none). The closed slices'
        -- push makes a new list where there is none, which find()'s
        -- flush() marks as having no expiry (refresh, below).
        local e, lt, lu = redis.call('LINDEX', log, '-1'), -1, 0
        if e then
          if #e ~= 16 or string.byte(e, 1) ~= 0 then lean = false break end
          lt, lu = sunpack(ENTRY, e)
          if lu < 0 then lean = false break end
          if ou == 0 and nb == 0 then tail = lt end
        elseif ou == 0 and nb == 0 then
          tail = head
        end
        if not now then
          now, at = clock(ARGV[1]), ARGV[2] + 0
        end
        -- The slice of the call's instant (find()), and for a calendar the
        -- ends of the days of the tail and the oldest entry (save()), as
        -- log.lua's day() finds them: the last bound at or before the
        -- instant but the last, when the instant lies before the next.
        local os = en > 0 and en - slice or 0 -- the open slice's start
        local s, length, tail_end, head_end
        if window then
          s, length = origin + floor((at - origin) / slice) * slice, slice
        else
          local from, to = nil, nil -- the call's day
          local p, pos = nil, 1
          while true do
            local comma = string.find(span, ',', pos, true)
            local q = tonumber(sub(span, pos, comma and comma - 1 or -1))
            if not q then
              bad = true
              break
            end
            if p then
              if p <= at then from, to = p, q end
              if p <= tail then tail_end = q end
              if p <= head then head_end = q end
            end
            if not comma then break end
            p, pos = q, comma + 1
          end
          if bad or not from or at >= to then lean = false break end
          if tail_end and tail >= tail_end then tail_end = nil end
          if head_end and head >= head_end then head_end = nil end
          length = floor((to - from) / 1000) -- log.lua's SLICES
          if length < 1000 then length = 1000 end -- its MIN_SLICE
          s = from + floor((at - from) / length) * length
        end
        -- find(): the oldest entry dated at or after the call, of the open
        -- slice (0), the closed ones (their place) and the log's last
        -- (-1), looking back from the newest no further than the first
        -- dated before the call (an older one in the log is left to
        -- log.lua); it counts the call when it lies in the call's slice.
        local found, ts, fu = nil, nil, 0
        if ou > 0 and (ot >= at or (not window and s == os)) then found, ts = 0, ot end
        local k = nb
        while k >= 1 do
          local t, u = sunpack(ENTRY, m, HEAD + 16 * k - 15)
          if t < at then break end
          found, ts, fu, k = k, t, u, k - 1
        end
        if k == 0 and lt >= at then
          local before = redis.call('LINDEX', log, '-2')
          if before and (#before ~= 16 or string.byte(before, 1) ~= 0 or sunpack(ENTRY, before) >= at) then
            lean = false
            break
          end
          found, ts, fu = -1, lt, lu
        end
        if not found or ts >= s + length then lean = false break end
        -- change(): an open slice emptied makes the log's newest entry
        -- the tail again, which is left to log.lua.
        local delta = ARGV[1 + 2 * i] + 0
        if found == 0 then
          if delta < -ou then delta = -ou end
          ou = ou + delta
          if ou == 0 then lean = false break end
        else
          if delta < -fu then delta = -fu end
          fu = fu + delta
        end
        sum = sum + delta
        if sum <= 0 then lean = false break end
        -- save(): the keys' expiry pushed back when it comes before the
        -- tail's window ends, or the log is new; the meta then learns the
        -- pauses in force and is listed in the scope's windows.
        local needed
        if window then
          needed = tail + window + 1000000
        else
          needed = (tail_end or (tail + 86400000000)) + 1000000
        end
        local refresh = needed > exp or (not e and nb > 0)
        local scope, bucket
        if refresh then
          exp = needed + math.max(window or 0, 1000000)
          scope, bucket = string.match(key, '^[^{]*{[^}]*}:'), string.match(key, '^(.*:)[^:]+:meta$')
          if scope and bucket then
            local p = redis.call('MGET', bucket .. 'pause', scope .. 'pause')
            for j = 1, 2 do
              if p[j] then
                if not string.match(p[j], '^%d+$') then bad = true end
                local u = tonumber(p[j])
                if u and u > pz then pz = u end
              end
            end
            if bad then lean = false break end
          end
        end
        til = 0
        if head ~= 0 and tail <= now then
          if window then
            til = math.min(head + 2 * window, exp - window - 1000000)
          else
            til = math.min(head_end or now, exp - 1000000)
          end
        end
        if pass == 2 then
          -- change() on the log's entry, and find()'s flush(), with the
          -- settled closed slice's new units.
          if found == -1 then redis.call('LSET', log, '-1', spack(ENTRY, ts, fu)) end
          if nb == 1 then
            local x = sub(m, HEAD + 1, HEAD + 16)
            if found == 1 then x = spack(ENTRY, ts, fu) end
            redis.call('RPUSH', log, x)
          elseif nb > 1 then
            local closed = {}
            for k = 1, nb do closed[k] = sub(m, HEAD + 16 * k - 15, HEAD + 16 * k) end
            if found > 0 then closed[found] = spack(ENTRY, ts, fu) end
            redis.call('RPUSH', log, unpack(closed))
          end
          local meta = '#3:' .. spack(META, ot, ou, sum, os > 0 and os + slice or 0, 0, til, pz,
            head, exp, origin, slice)
          if refresh then
            local ms = floor((exp - now) / 1000)
            if scope and bucket then
              local reg = scope .. 'windows'
              redis.call('ZADD', reg, string.format('%d', exp), key)
              if redis.call('PTTL', reg) < ms then redis.call('PEXPIRE', reg, ms) end
            end
            redis.call('SET', key, meta, 'PX', string.format('%d', ms))
            redis.call('PEXPIRE', log, ms)
          else
            redis.call('SET', key, meta, 'KEEPTTL')
          end
        end
        settled = settled + 1
      until true
      if not lean then
        -- Nothing is written before the last check of a call's windows
        -- passed (a second pass repeats the first's checks on the same
        -- state).
        if pass == 2 and i > 1 then error('ERR tollgate: a settlement of windows changed while settled', 0) end
        break
      end
    end
    if not lean then break end
    if pass == 2 then return settled end
  end
end
