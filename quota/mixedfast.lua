-- mixedfast.lua: the common decision on a charge of windows and token
-- buckets together, e.g. Gemini's requests a minute as a bucket beside its
-- requests a Pacific day, taken after bucketfast.lua (buckets alone) and
-- before fast.lua (windows alone), neither of which takes a mix.
--
-- Provides: nothing; it returns fast.lua's reply (8-byte big-endian
-- integers: now, then per limit a window's sum, or a bucket's units out,
-- before this call), or falls through to fast.lua and the general code.
-- Needs: binary.lua, now.lua. KEYS and ARGV are reserve.lua's.
--
-- It takes a charge of at least one window and one or two buckets (a
-- bucket's span begins "r") when each limit is as its own common decision
-- takes it: a window as fast.lua does (its meta of this format, needing no
-- care now, no pause in its pause field, room), a bucket as bucketfast.lua
-- does (its state of this format or none, no hold waiting, room now, and
-- its bucket's pause key unset). The scope's pause key is not read: a
-- pause of the scope is written into the pause field of every meta of its
-- windows (reach.lua, log.lua's save()), and the charge has a window.
-- Then one MGET (the buckets' pause keys, then every meta and state) and
-- one SET per limit (and fast.lua's RPUSH when a window's closed slices
-- are due) count the call, all or nothing: the general decision would
-- admit it now in every limit, and write the buckets' states byte for
-- byte as here (bucket.lua's bucket_admit and bucket_write written out),
-- and the windows' entries and sums as fast.lua writes them. Anything
-- else falls through.
--
-- Written out, as fast.lua and bucketfast.lua are: no function and no
-- table made (each a closure or an allocation for Lua's collector; but
-- the entries of fast.lua's push, once in BUFFER slices), the
-- states read by one struct.unpack each and written by one struct.pack, a
-- window's unchanged fields copied as bytes; the two passes (check, then
-- write) unpack each state again rather than keep it in a table. So the
-- count in a window is fast.lua's, and in a bucket bucketfast.lua's,
-- written again: as a Lua function shared by the parts it would be a
-- closure made at every call, on every common decision. The buckets'
-- suite (MixedFastAgrees) holds this part to the general code.

local nl = (#ARGV - 3) / 3
if now >= 1e15 and nl >= 2 then
  local sub, byte = string.sub, string.byte
  -- The buckets' pause keys, named after their states' (bucket.lua's
  -- SPAN); np = -1 for a charge this part does not take.
  local p1, p2
  local np = 0
  for i = 1, nl do
    local span = ARGV[3 * i + 3]
    if byte(span, 1) == 114 then -- 'r'
      if np == 2 or #span ~= SPAN_LEN or ARGV[3 * i + 1] + 0 <= 0 then
        -- (a call of no units leaves a bucket that was full full:
        -- bucket_write deletes its state rather than set it)
        np = -1
        break
      end
      local _, _, bl = sunpack(SPAN, span, 2)
      if np == 0 then
        p1 = sub(KEYS[i], 1, bl) .. 'pause'
      else
        p2 = sub(KEYS[i], 1, bl) .. 'pause'
      end
      np = np + 1
    end
  end
  if np > 0 and np < nl then
    local r
    if np == 1 then
      r = redis.call('MGET', p1, unpack(KEYS, 1, nl))
    else
      r = redis.call('MGET', p1, p2, unpack(KEYS, 1, nl))
    end
    local go = not r[1] and not r[np]
    for i = 1, nl do
      if not go then break end
      local m, span = r[np + i], ARGV[3 * i + 3]
      if byte(span, 1) == 114 then
        local p, rate = sunpack(SPAN, span, 2)
        local u, s, tail = 0, 0, 0
        if m then
          if #m ~= BUCKET_LEN or sub(m, 1, 4) ~= '#3r:' then
            go = false
            break
          end
          u, s, tail = sunpack(BUCKET, m, 5)
        end
        -- The debt at now, which must leave room; no hold waits.
        local d = 0
        if s > 0 and (now - u) * rate < s then d = s - (now - u) * rate end
        go = u <= now and tail <= now and d <= (ARGV[3 * i + 2] + 0) * p
      else
        if not m or #m < HEAD or sub(m, 1, 3) ~= '#3:' then
          go = false
          break
        end
        local _, _, sum, _, nb, til, pz = sunpack(META, m, 4)
        go = now < til and now >= pz and nb < BUFFER and #m >= HEAD + 16 * nb and
          sum <= ARGV[3 * i + 2] + 0
      end
    end
    if go then
      local reply = spack('>i8', now)
      for i = 1, nl do
        local m, span, add = r[np + i], ARGV[3 * i + 3], ARGV[3 * i + 1] + 0
        if byte(span, 1) == 114 then
          -- bucket_admit at now, then bucket_write: the bucket is full
          -- again after now (add > 0), and tail is now.
          local p, rate = sunpack(SPAN, span, 2)
          local u, s, tail, tn, prev = 0, 0, 0, 0, 0
          if m then u, s, tail, tn, prev = sunpack(BUCKET, m, 5) end
          local d = 0
          if s > 0 and (now - u) * rate < s then d = s - (now - u) * rate end
          s = d + add * p
          if now > tail then
            prev, tail, tn = tail, now, add
          elseif tn < UNKNOWN then
            tn = tn + add
          end
          local ms = math.floor((math.ceil(s / rate) + p) / 1000) + 1000
          redis.call('SET', KEYS[i], '#3r:' .. spack(BUCKET, now, s, tail, tn, prev), 'PX', string.format('%d', ms))
          reply = reply .. spack('>i8', math.ceil(d / p))
        else
          -- fast.lua's count in a window's open slice, or a new one.
          local at, units, sum, en, nb, _, _, _, exp, origin, slice = sunpack(META, m, 4)
          local meta
          if now < en then
            if now > at then at = now end
            meta = '#3:' .. spack('>i8i8i8', at, units + add, sum + add) .. sub(m, 28)
          else
            en = origin + (math.floor((now - origin) / slice) + 1) * slice
            local closed = HEAD + 16 * nb
            if units == 0 then
              meta = '#3:' .. spack('>i8i8i8i8B', now, add, sum + add, en, nb) .. sub(m, 37)
            elseif nb + 1 < BUFFER then
              meta = '#3:' .. spack('>i8i8i8i8B', now, add, sum + add, en, nb + 1) .. sub(m, 37, closed) ..
                sub(m, 4, 19) .. sub(m, closed + 1)
            else
              -- It and the closed slices join the log, in one push (a
              -- table made once in BUFFER slices).
              local entries = {}
              for k = 1, nb do entries[k] = sub(m, HEAD + 16 * k - 15, HEAD + 16 * k) end
              entries[BUFFER] = sub(m, 4, 19)
              local log = KEYS[nl + i]
              if redis.call('RPUSH', log, unpack(entries)) == BUFFER then
                redis.call('PEXPIRE', log, string.format('%d', math.floor((exp - now) / 1000)))
              end
              meta = '#3:' .. spack('>i8i8i8i8B', now, add, sum + add, en, 0) .. sub(m, 37, HEAD) .. sub(m, closed + 1)
            end
          end
          redis.call('SET', KEYS[i], meta, 'KEEPTTL')
          reply = reply .. spack('>i8', sum)
        end
      end
      return reply
    end
  end
end
