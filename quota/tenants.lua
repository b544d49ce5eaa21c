-- tenants.lua: read, writing nothing, in one step, the tenants of a
-- window with shares and the calls waiting in its bucket's room
-- (fairroom.lua), so that what a tenant spent and what it has waiting are
-- seen at one instant.
--
-- Needs: clock.lua.
--
-- KEYS: the window's tenants key, the bucket's room's alive set
-- ARGV: clock
-- Reply: {the tenants key's value (nil: none), the waiters whose place
--         has not expired ("<id>:<i|b><tenant>")}

local now = clock(ARGV[1])
-- Counted from ZRANGEBYSCORE, as inspect.lua counts, so that the README's
-- ACL line grants what this script needs.
local after = '(' .. string.format('%d', now)
return {redis.call('GET', KEYS[1]), redis.call('ZRANGEBYSCORE', KEYS[2], after, '+inf')}
