-- pause.lua (after log.lua): stop a bucket (or, with field '*', a whole scope) from
-- admitting anything for a while, on the decision clock.
--
-- KEYS: pause (a hash: field -> µs at which spending may resume)
-- ARGV: clock (µs, or '' for the server's TIME), field, duration µs
-- Reply: the instant the pause ends.

local now = clock(ARGV[1])
local resume = now + tonumber(ARGV[3])
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[2]))
if old and old >= resume then return old end
redis.call('HSET', KEYS[1], ARGV[2], string.format('%d', resume))
local ms = math.floor((resume - now) / 1000) + 1000
if redis.call('PTTL', KEYS[1]) < ms then
  redis.call('PEXPIRE', KEYS[1], ms)
end
return resume
