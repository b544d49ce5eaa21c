-- bucketfast.lua: the common decision on a token bucket alone, taken
-- before fast.lua, which takes the common decision on windows.
--
-- Provides: nothing; it returns fast.lua's reply (8-byte big-endian
-- integers: now, and the units out of the bucket before this call, as a
-- window's sum), or falls through to fast.lua.
-- Needs: binary.lua, bucket.lua. KEYS and ARGV are reserve.lua's.
--
-- One charge of one limit, a bucket (its span "r..."), on the server's
-- clock (or a caller's after 2001, as fast.lua), with no pause key set,
-- no hold waiting and room now: the call is counted with one MGET (the
-- state and the two pause keys) and one SET. Anything else falls through
-- to the general decision, which decides the same way in every case
-- (bucket.lua's bucket_fit and bucket_admit, written out here).

if #ARGV == 6 and string.byte(ARGV[6], 1) == 114 then -- 'r'
  local now
  if ARGV[1] == '' then
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  else
    now = tonumber(ARGV[1])
  end
  local r = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
  local m = r[1]
  if now >= 1e15 and not r[2] and not r[3] and (not m or (#m == BUCKET_LEN and string.sub(m, 1, 4) == '#3r:')) then
    local c = string.find(ARGV[6], ':', 3, true)
    local p, rate = tonumber(string.sub(ARGV[6], 2, c - 1)), tonumber(string.sub(ARGV[6], c + 1))
    local need = tonumber(ARGV[4])
    local room = tonumber(ARGV[5]) * p -- the capacity less the call, in debt
    local u, s, tail, tn, prev = 0, 0, 0, 0, 0
    if m then u, s, tail, tn, prev = sunpack(BUCKET, m, 5) end
    -- The debt at now (u <= now: no hold waits).
    local d = 0
    if u <= now and tail <= now and s >= 0 then
      if s > 0 and (now - u) * rate < s then d = s - (now - u) * rate end
      if d <= room then
        s = d + need * p
        if now > tail then
          prev, tail, tn = tail, now, need
        elseif tn < UNKNOWN then
          tn = tn + need
        end
        local ms = math.floor((math.ceil(s / rate) + p) / 1000) + 1000
        redis.call('SET', KEYS[1], '#3r:' .. spack(BUCKET, now, s, tail, tn, prev), 'PX', ms)
        return spack('>i8i8', now, math.ceil(d / p))
      end
    end
  end
end
