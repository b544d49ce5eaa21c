-- pause.lua: stop a bucket, or a whole scope, from admitting anything for
-- a while, on the decision clock.
--
-- Needs: clock.lua, binary.lua, reach.lua. (It writes the pause as
-- log.lua's pause_end() reads it: the instant in µs, as a decimal integer,
-- and into the metas of the windows it stops.)
--
-- KEYS: the pause key (the bucket's or the scope's), its upstream key (see
--       control.lua): a pause set here is an upstream's
-- ARGV: clock (µs, or '' for the server's TIME), duration µs
-- Reply: the instant the pause ends; a longer pause already set stays.

local now = clock(ARGV[1])
local resume = now + tonumber(ARGV[2])
local v = redis.call('GET', KEYS[1])
local old = v and string.match(v, '^%d+$')
if v and not old then
  return redis.error_reply('FORMAT tollgate: ' .. KEYS[1] ..
    ' holds a pause of a Redis format this tollgate cannot read')
end
old = tonumber(old)
if old and old >= resume then
  reach(KEYS[1], old, now)
  return old
end
local ms = math.floor((resume - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%d', resume), 'PX', ms)
redis.call('SET', KEYS[2], string.format('%d', resume), 'PX', ms)
reach(KEYS[1], resume, now)
return resume
