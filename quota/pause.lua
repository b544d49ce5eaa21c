-- pause.lua (after log.lua): stop a bucket, or a whole scope, from
-- admitting anything for a while, on the decision clock.
--
-- KEYS: the pause key (the bucket's or the scope's): the instant in µs at
--       which spending may resume
-- ARGV: clock (µs, or '' for the server's TIME), duration µs
-- Reply: the instant the pause ends; a longer pause already set stays.

local now = clock(ARGV[1])
local resume = now + tonumber(ARGV[2])
local old = tonumber(redis.call('GET', KEYS[1]))
if old and old >= resume then return old end
redis.call('SET', KEYS[1], string.format('%d', resume), 'PX', math.floor((resume - now) / 1000) + 1000)
return resume
