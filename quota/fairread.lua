-- fairread.lua: the fair reserve script's read of its metas, before the
-- pauses (readpauses.lua) and its decision (fairreserve.lua).
--
-- Provides: n (the windows), read (their metas).
-- Needs: KEYS as fairreserve.lua's: the metas, the logs, the tenants,
-- then the room's four keys.

local n = (#KEYS - 4) / 3
local read = redis.call('MGET', unpack(KEYS, 1, n))
