-- bucketfast.lua: the common decision on token buckets alone, taken
-- before fast.lua, which takes the common decision on windows.
--
-- Provides: nothing; it returns fast.lua's reply (8-byte big-endian
-- integers: now, and per limit the units out of the bucket before this
-- call, as a window's sum), or falls through to fast.lua.
-- Needs: binary.lua, now.lua (it comes before bucket.lua: the common
-- decision writes out what it needs, and makes no closure). KEYS and ARGV
-- are reserve.lua's.
--
-- Every limit of the decision a bucket (its span "r..."), e.g. a model's
-- requests, input tokens and output tokens a minute; the server's clock
-- (or a caller's after 2001, as fast.lua); no pause key set, no hold
-- waiting and room now in every bucket: the call is counted with one MGET
-- (the states and the pause keys, named after the states' as fast.lua
-- names them) and one SET per bucket. Anything else
-- falls through to the general decision, which decides the same way in
-- every case (bucket.lua's bucket_fit and bucket_admit, written out here).

local first = ARGV[6] -- the first limit's span: a bucket's begins "r"
if first and string.byte(first, 1) == 114 then
  if #ARGV == 6 and #first == SPAN_LEN then
    -- One bucket, the commonest: written out with no table.
    -- The pauses, named after the state's key (bucket.lua's SPAN): its
    -- bucket's, its scope's.
    local p, rate, bl, sl = sunpack(SPAN, ARGV[6], 2)
    local key = KEYS[1]
    local r = redis.call('MGET', key, string.sub(key, 1, bl) .. 'pause', string.sub(key, 1, sl) .. 'pause')
    local m = r[1]
    if now >= 1e15 and not r[2] and not r[3] and (not m or (#m == BUCKET_LEN and string.sub(m, 1, 4) == '#3r:')) then
      local u, s, tail, tn, prev = 0, 0, 0, 0, 0
      if m then u, s, tail, tn, prev = sunpack(BUCKET, m, 5) end
      if u <= now and tail <= now then
        local d = 0
        if s > 0 and (now - u) * rate < s then d = s - (now - u) * rate end
        if d <= (ARGV[5] + 0) * p then
          local need = ARGV[4] + 0
          s = d + need * p
          if now > tail then
            prev, tail, tn = tail, now, need
          elseif tn < UNKNOWN then
            tn = tn + need
          end
          local ms = math.floor((math.ceil(s / rate) + p) / 1000) + 1000
          redis.call('SET', KEYS[1], '#3r:' .. spack(BUCKET, now, s, tail, tn, prev), 'PX', string.format('%d', ms))
          return spack('>i8i8', now, math.ceil(d / p))
        end
      end
    end
  else
    local nb = (#ARGV - 3) / 3
    local all = nb >= 1
    for i = 1, nb do
      if string.byte(ARGV[3 * i + 3], 1) ~= 114 or #ARGV[3 * i + 3] ~= SPAN_LEN then -- 'r'
        all = false
        break
      end
    end
    if all then
      -- Two tables for the whole call, each made at its full size for up
      -- to four buckets (a table grown key by key is rehashed at each
      -- power of two, and a table per bucket costs more than its reads;
      -- more buckets grow them, deciding the same): v holds the keys MGET
      -- reads (the states, then the pauses, named after the states' keys:
      -- each bucket's, and the scope's), then, once they are read, per
      -- bucket i its room before this call (v[i], the reply), its new
      -- state (v[nb + i]) and that state's TTL (v[2 * nb + i]); pr holds
      -- each bucket's period and refill, its span unpacked once.
      local v = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
      local pr = {0, 0, 0, 0, 0, 0, 0, 0}
      local sl
      for i = 1, nb do
        local p, rate, bl, l = sunpack(SPAN, ARGV[3 * i + 3], 2)
        pr[2 * i - 1], pr[2 * i], sl = p, rate, l
        v[i] = KEYS[i]
        v[nb + i] = string.sub(KEYS[i], 1, bl) .. 'pause'
      end
      local nread = 2 * nb + 1
      v[nread] = string.sub(KEYS[1], 1, sl) .. 'pause'
      local r = redis.call('MGET', unpack(v, 1, nread))
      local go = now >= 1e15
      for i = nb + 1, nread do
        if r[i] then go = false end
      end
      -- Each bucket decided and its new state made as it is read; nothing
      -- is written until every bucket has room.
      for i = 1, nb do
        if not go then break end
        local m = r[i]
        local tag, u, s, tail, tn, prev = '#3r:', 0, 0, 0, 0, 0
        if m then
          if #m ~= BUCKET_LEN then
            go = false
            break
          end
          tag, u, s, tail, tn, prev = sunpack(TAGGED, m, 1)
        end
        if tag ~= '#3r:' then
          go = false
          break
        end
        -- The debt at now, which must leave room: no hold waits (u, tail
        -- <= now).
        if u > now or tail > now then
          go = false
          break
        end
        local p, rate, d = pr[2 * i - 1], pr[2 * i], 0
        if s > 0 and (now - u) * rate < s then d = s - (now - u) * rate end
        if d > (ARGV[3 * i + 2] + 0) * p then
          go = false
          break
        end
        local need = ARGV[3 * i + 1] + 0
        s = d + need * p
        if now > tail then
          prev, tail, tn = tail, now, need
        elseif tn < UNKNOWN then
          tn = tn + need
        end
        v[i] = math.ceil(d / p)
        v[nb + i] = spack(TAGGED, '#3r:', now, s, tail, tn, prev)
        v[2 * nb + i] = math.floor((math.ceil(s / rate) + p) / 1000) + 1000
      end
      if go then
        for i = 1, nb do
          redis.call('SET', KEYS[i], v[nb + i], 'PX', string.format('%d', v[2 * nb + i]))
        end
        -- The reply packed at once: now, then each bucket's room.
        return spack('>' .. string.rep('i8', nb + 1), now, unpack(v, 1, nb))
      end
    end
  end
end
