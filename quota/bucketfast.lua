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
-- to the general decision, which decides the same way in every case.

if #ARGV == 6 and string.byte(ARGV[6], 1) == 114 then -- 'r'
  local now
  if ARGV[1] == '' then
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  else
    now = tonumber(ARGV[1])
  end
  local r = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
  if now >= 1e15 and not r[2] and not r[3] then
    local B = bucket_limit(KEYS[1], ARGV[6])
    bucket_read(B, r[1])
    local need = tonumber(ARGV[4])
    B.C = tonumber(ARGV[5]) + need
    if B.tail <= now and bucket_fit(B, now, need) == now then
      local used = bucket_used(B, now)
      bucket_admit(B, now, need)
      bucket_write(B, now)
      return spack('>i8i8', now, used)
    end
  end
end
