-- bucketusage.lua: read, writing nothing, a token bucket's level at now;
-- usage.lua's reply, for a bucket.
--
-- Needs: clock.lua, binary.lua, bucket.lua.
--
-- KEYS: usage.lua's: the bucket's state (twice), the bucket's pause, the
--       scope's pause
-- ARGV: clock, span ("r" and bucket.lua's SPAN), capacity
-- Reply: {now, used, held, nextfree, reset, resume}
--   used:     units out of the bucket at now (its capacity less its
--             level), holds included; more than the capacity after
--             extra charges; the capacity while a hold waits beyond the
--             instant the bucket would be empty (a window set it): nothing
--             fits before it
--   held:     units admitted at instants after now (the newest instant's,
--             when known)
--   nextfree: when the bucket holds a unit more (0: nothing out)
--   reset:    when the bucket is full again (0: it is)
--   resume:   when the latest pause of the bucket or scope ends (0: none)

local now = clock(ARGV[1])
local read = redis.call('MGET', KEYS[2], KEYS[3], KEYS[4])
local B = bucket_limit(KEYS[2], ARGV[2])
bucket_read(B, read[1])
local used = bucket_used(B, now)
local held, nextfree, reset = 0, 0, 0
if B.tail > now then
  if B.tn < UNKNOWN then held = B.tn end
  used = math.min(used, tonumber(ARGV[3]))
end
if used > 0 then
  -- The debt falls to (used - 1) units' worth at u + (s - that)/R.
  nextfree = B.u + math.ceil((B.s - (used - 1) * B.P) / B.R)
  if nextfree < now then nextfree = now end
  reset = bucket_full(B)
end
local resume = 0
for i = 2, 3 do
  local v = read[i]
  if v then
    local u = string.match(v, '^%d+$')
    if not u then
      error('FORMAT tollgate: ' .. KEYS[i + 1] .. ' holds a pause of a Redis format this tollgate cannot read', 0)
    end
    if tonumber(u) > resume then resume = tonumber(u) end
  end
end
return {now, used, held, nextfree, reset, resume}
